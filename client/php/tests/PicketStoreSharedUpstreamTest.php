<?php

declare(strict_types=1);

namespace Picket\Lock\Tests;

require_once __DIR__ . '/upstream/symfony-lock/AbstractStoreTestCase.php';
require_once __DIR__ . '/upstream/symfony-lock/SharedLockStoreTestTrait.php';

use Picket\Lock\PicketStore;
use Symfony\Component\Lock\PersistingStoreInterface;
use Symfony\Component\Lock\Tests\Store\AbstractStoreTestCase;
use Symfony\Component\Lock\Tests\Store\SharedLockStoreTestTrait;

/**
 * symfony/lock's own store test cases and its shared-lock cases
 * (upstream/symfony-lock, unchanged) against PicketStore with the rwlock
 * option, where save() takes a write lease and saveRead() a read lease of
 * picketd's read/write lock, on a real picketd (PICKET_URL).
 */
final class PicketStoreSharedUpstreamTest extends AbstractStoreTestCase
{
    use SharedLockStoreTestTrait;

    protected function getStore(): PersistingStoreInterface
    {
        return new PicketStore(picket_url(), ['rwlock' => true]);
    }
}
