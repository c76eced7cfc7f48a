<?php

declare(strict_types=1);

namespace Picket\Lock\Tests;

use Picket\Lock\PicketStore;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

/** symfony's own Lock and LockFactory on top of PicketStore. */
final class LockFactoryTest extends TestCase
{
    public function testAcquireReleaseAndIsAcquired(): void
    {
        $store = new PicketStore(picket_url());
        $factory = new LockFactory($store);
        $r = picket_resource('factory');
        $lock = $factory->createLock($r, 30);
        $this->assertTrue($lock->acquire());
        $this->assertTrue($lock->isAcquired());
        $this->assertEqualsWithDelta(30, $lock->getRemainingLifetime(), 1.0);
        $this->assertFalse($factory->createLock($r)->acquire(), 'a second Lock of the same resource');
        $lock->release();
        $this->assertFalse($lock->isAcquired());
        $this->assertTrue($factory->createLock($r)->acquire());
    }

    public function testAutoReleaseOnDestruct(): void
    {
        $factory = new LockFactory(new PicketStore(picket_url()));
        $r = picket_resource('destruct');
        $lock = $factory->createLock($r);
        $this->assertTrue($lock->acquire());
        unset($lock); // __destruct releases it
        $other = $factory->createLock($r, 300, false);
        $this->assertTrue($other->acquire(), 'not released on destruct');
        unset($other); // autoRelease false: stays held
        $this->assertFalse($factory->createLock($r)->acquire());
    }

    public function testBlockingAcquire(): void
    {
        $r = picket_resource('factory-wait');
        [$p, $out, $heldFence] = picket_holder($r, 600);
        $key = new Key($r);
        $store = new PicketStore(picket_url());
        $lock = (new LockFactory($store))->createLockFromKey($key, 10);
        $t0 = microtime(true);
        $this->assertTrue($lock->acquire(true));
        $waited = microtime(true) - $t0;
        $this->assertSame("released\n", fgets($out));
        proc_close($p);
        $this->assertGreaterThan(0.3, $waited);
        $this->assertLessThan(5.0, $waited);
        $this->assertGreaterThan($heldFence, $store->fence($key), 'the fence of the Lock, from its Key');
        $lock->release();
    }

    public function testRefreshAndLoss(): void
    {
        $store = new PicketStore(picket_url());
        $factory = new LockFactory($store);
        $r = picket_resource('factory-refresh');
        $lock = $factory->createLock($r, 0.4);
        $this->assertTrue($lock->acquire());
        $lock->refresh(5);
        usleep(700000);
        $this->assertTrue($lock->isAcquired(), 'refresh(5) kept it past 0.4 s');
        $lock->refresh(0.3);
        usleep(500000);
        $this->assertFalse($lock->isAcquired());
        $this->assertTrue($lock->isExpired());
        $thief = $factory->createLock($r, 30);
        $this->assertTrue($thief->acquire());
        $this->expectException(LockConflictedException::class);
        $lock->refresh();
    }
}
