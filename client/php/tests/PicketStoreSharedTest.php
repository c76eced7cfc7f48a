<?php

declare(strict_types=1);

namespace Picket\Lock\Tests;

use Picket\Lock\PicketStore;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

/**
 * PicketStore's shared (read) locks, option rwlock, against a real picketd
 * (PICKET_URL): leases of /v1/rwlocks seen by plain curl, fences and their
 * lock name NAME:rw, symfony's Lock::acquireRead(), promotion and
 * demotion, a waiting read, names; and saveRead() without the option.
 */
final class PicketStoreSharedTest extends TestCase
{
    private function store(array $o = []): PicketStore
    {
        return new PicketStore(picket_url(), $o + ['rwlock' => true]);
    }

    /** GET /v1/rwlocks/{name} by plain curl, as an operator sees it. */
    private function status(string $name): array
    {
        [$status, $body] = picket_request('GET', '/v1/rwlocks/' . rawurlencode($name));
        $this->assertSame(200, $status);

        return $body;
    }

    public function testReadersShareAndWriterExcludes(): void
    {
        $s = $this->store();
        $this->assertInstanceOf(BlockingSharedLockStoreInterface::class, $s);
        $res = picket_resource('rw');
        [$w, $r1, $r2, $w2] = [new Key($res), new Key($res), new Key($res), new Key($res)];
        $s->save($w);
        $this->assertSame('write', $s->mode($w));
        $this->assertSame($res . ':rw', $s->lock($w));
        $st = $this->status($res);
        $this->assertSame($s->fence($w), $st['fence']);
        $this->assertNotNull($st['writer']);
        $this->assertSame(0, $st['readers']);
        $this->assertFalse(picket_request('GET', '/v1/locks/' . $res)[1]['held'], 'a rwlock, not a lock');
        try {
            $s->saveRead($r1);
            $this->fail('read under a writer');
        } catch (LockConflictedException) {
        }
        $writeFence = $s->fence($w);
        $s->delete($w);
        $s->saveRead($r1);
        $s->saveRead($r2);
        $this->assertSame('read', $s->mode($r1));
        $this->assertSame($writeFence, $s->fence($r1), "a read's fence is the last write's");
        $this->assertSame(2, $this->status($res)['readers']);
        try {
            $s->save($w2);
            $this->fail('wrote under readers');
        } catch (LockConflictedException) {
        }
        $readFence = $s->fence($r1);
        $s->delete($r1);
        $s->delete($r2);
        $s->save($w2);
        $this->assertGreaterThan($readFence, $s->fence($w2), "a write's fence is above every earlier grant's");
        $s->delete($w2);
        $st = $this->status($res);
        $this->assertSame([null, 0], [$st['writer'], $st['readers']]);
    }

    public function testPromotionAndDemotion(): void
    {
        $s = $this->store();
        $res = picket_resource('promote');
        [$a, $b] = [new Key($res), new Key($res)];
        $s->saveRead($a);
        $s->saveRead($b);
        try {
            $s->save($a);
            $this->fail('promoted beside another reader');
        } catch (LockConflictedException) {
        }
        $this->assertTrue($s->exists($a), 'a refused promotion keeps the read lease');
        $this->assertSame('read', $s->mode($a));
        $s->delete($b);
        $read = $s->fence($a);
        $s->save($a); // now alone: promoted
        $this->assertSame('write', $s->mode($a));
        $this->assertGreaterThan($read, $s->fence($a));
        $this->assertSame([1, 0], [$this->status($res)['writer'] !== null ? 1 : 0, $this->status($res)['readers']]);
        $s->saveRead($a); // demoted
        $this->assertSame('read', $s->mode($a));
        $s->saveRead($b);
        $this->assertSame(2, $this->status($res)['readers']);
        $s->delete($a);
        $s->delete($b);
    }

    public function testLockAcquireRead(): void
    {
        $f = new LockFactory($this->store());
        $res = picket_resource('factory');
        $r1 = $f->createLock($res, 30);
        $r2 = $f->createLock($res, 30);
        $w = $f->createLock($res, 30);
        $this->assertTrue($r1->acquireRead());
        $this->assertTrue($r2->acquireRead());
        $this->assertFalse($w->acquire());
        $st = $this->status($res);
        $this->assertSame(2, $st['readers']);
        foreach ($st['read_leases'] as $l) {
            $this->assertEqualsWithDelta(30000, $l['ttl_ms'], 2000, "the Lock's ttl, by refresh()");
        }
        $r1->release();
        $r2->release();
        $this->assertTrue($w->acquire());
        $this->assertFalse($r1->acquireRead());
        $w->release();
    }

    public function testWaitAndSaveRead(): void
    {
        $s = $this->store();
        $res = picket_resource('waitread');
        // another client's write lease, left to expire in 400 ms
        [$status] = picket_request('POST', '/v1/rwlocks/' . $res . '/acquire', ['mode' => 'write', 'ttl_ms' => 400]);
        $this->assertSame(200, $status);
        $r = new Key($res);
        try {
            $s->saveRead($r);
            $this->fail('read under a writer');
        } catch (LockConflictedException) {
        }
        $t0 = microtime(true);
        $s->waitAndSaveRead($r);
        $this->assertGreaterThan(0.2, microtime(true) - $t0, 'it waited for the writer');
        $this->assertLessThan(5, microtime(true) - $t0);
        $this->assertSame('read', $s->mode($r));
        $this->assertTrue($s->exists($r));
        $s->delete($r);
    }

    public function testNames(): void
    {
        $s = $this->store();
        $k = new Key('App\\Catalog::rebuild');
        $s->saveRead($k);
        $this->assertSame(PicketStore::lockName('App\\Catalog::rebuild') . ':rw', $s->lock($k));
        $s->delete($k);
        $this->expectException(InvalidArgumentException::class);
        $s->saveRead(new Key('php-test.' . str_repeat('x', 190)));
    }

    public function testWithoutTheOptionReadIsExclusive(): void
    {
        $s = new PicketStore(picket_url());
        $res = picket_resource('plainread');
        [$a, $b] = [new Key($res), new Key($res)];
        $s->saveRead($a);
        $this->assertNull($s->mode($a));
        $this->assertSame($res, $s->lock($a));
        $this->assertTrue(picket_request('GET', '/v1/locks/' . $res)[1]['held']);
        try {
            $s->saveRead($b);
            $this->fail('two readers on a plain lock');
        } catch (LockConflictedException) {
        }
        $s->delete($a);
    }
}
