<?php

declare(strict_types=1);

namespace Picket\Semaphore\Tests;

require_once __DIR__ . '/upstream/symfony-semaphore/AbstractStoreTestCase.php';

use Picket\Semaphore\PicketSemaphoreStore;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\PersistingStoreInterface;
use Symfony\Component\Semaphore\Tests\Store\AbstractStoreTestCase;

/**
 * symfony/semaphore's own store test cases (upstream/symfony-semaphore,
 * unchanged) against PicketSemaphoreStore on a real picketd (PICKET_URL).
 * Their resources are fixed strings (__METHOD__), mapped to "h." names; the
 * runner's picketd and Redis are new each run.
 */
final class PicketSemaphoreStoreUpstreamTest extends AbstractStoreTestCase
{
    protected function getStore(): PersistingStoreInterface
    {
        return new PicketSemaphoreStore(picket_url());
    }

    /**
     * Upstream's case, but for the message: it expects RedisStore's own
     * words, "...has expired: the script returns a positive number.", about
     * its Lua script. This store throws the same exception for the same
     * case, in words about picket; saying RedisStore's would be untrue.
     */
    public function testPutOffExpirationWhenSaveHasNotBeenCalled()
    {
        $store = $this->getStore();
        $key1 = new Key(AbstractStoreTestCase::class . '::' . __FUNCTION__, 4, 2);

        $this->expectException(SemaphoreExpiredException::class);
        $this->expectExceptionMessage('The semaphore "Symfony\Component\Semaphore\Tests\Store\AbstractStoreTestCase::testPutOffExpirationWhenSaveHasNotBeenCalled" has expired: it holds no permit');

        $store->putOffExpiration($key1, 20);
    }
}
