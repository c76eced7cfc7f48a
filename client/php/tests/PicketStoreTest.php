<?php

declare(strict_types=1);

namespace Picket\Lock\Tests;

use Picket\Lock\Exception\PicketHttpException;
use Picket\Lock\PicketStore;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;

/** PicketStore against a real picketd (PICKET_URL). */
final class PicketStoreTest extends TestCase
{
    private function store(array $o = []): PicketStore
    {
        return new PicketStore(picket_url(), $o);
    }

    /** GET /v1/locks/{name} by plain curl, as an operator sees it. */
    private function status(string $name): array
    {
        [$status, $body] = picket_request('GET', '/v1/locks/' . rawurlencode($name));
        $this->assertSame(200, $status);

        return $body;
    }

    public function testAcquireAndRelease(): void
    {
        $s = $this->store();
        $k = new Key(picket_resource('basic'));
        $s->save($k);
        $this->assertTrue($s->exists($k));
        $this->assertGreaterThan(0, $s->fence($k));
        $this->assertNull($s->fenceToken($k), 'no --fence-key-file, no token');
        $st = $this->status((string) $k);
        $this->assertTrue($st['held']);
        $this->assertSame($s->fence($k), $st['fence']);
        $this->assertEqualsWithDelta(300000, $st['ttl_ms'], 5000, 'the default ttl is 300 s');
        $s->delete($k);
        $this->assertFalse($s->exists($k));
        $this->assertFalse($this->status((string) $k)['held']);
        $s->delete($k); // twice is fine
    }

    public function testRetriedSaveIsIdempotent(): void
    {
        $s = $this->store();
        $k = new Key(picket_resource('idem'));
        $s->save($k);
        $f = $s->fence($k);
        $s->save($k); // a retry: same lease, same grant
        $this->assertSame($f, $s->fence($k));
        $s->delete($k);
    }

    public function testConflictBetweenTwoStores(): void
    {
        $r = picket_resource('conflict');
        [$a, $b] = [$this->store(['owner' => 'store-a']), $this->store()];
        [$ka, $kb] = [new Key($r), new Key($r)];
        $a->save($ka);
        try {
            $b->save($kb);
            $this->fail('a second key took a held lock');
        } catch (LockConflictedException $e) {
            $prev = $e->getPrevious();
            $this->assertInstanceOf(PicketHttpException::class, $prev);
            $this->assertSame('lock_held', $prev->errorCode);
            $this->assertSame('store-a', $prev->owner);
            $this->assertGreaterThan(0, $prev->retryAfterMs);
        }
        $this->assertFalse($b->exists($kb));
        // Another key of the same store conflicts too: the lease is per key.
        $this->expectException(LockConflictedException::class);
        try {
            $a->save(new Key($r));
        } finally {
            $a->delete($ka);
            $b->save($kb);
            $this->assertTrue($b->exists($kb));
            $b->delete($kb);
        }
    }

    public function testBlockingAcquireIsWokenByRelease(): void
    {
        $r = picket_resource('wait');
        [$p, $out, $heldFence] = picket_holder($r, 800);
        // Waits of at most 200 ms a request: the store loops over several.
        $s = $this->store(['max_wait_ms' => 200]);
        $k = new Key($r);
        $t0 = microtime(true);
        $s->waitAndSave($k);
        $waited = microtime(true) - $t0;
        $this->assertSame("released\n", fgets($out));
        proc_close($p);
        $this->assertTrue($s->exists($k));
        $this->assertGreaterThan($heldFence, $s->fence($k));
        $this->assertGreaterThan(0.4, $waited, 'granted before the holder released');
        $this->assertLessThan(5.0, $waited, 'not woken by the release');
        $this->assertGreaterThan(290, $k->getRemainingLifetime(), 'lifetime counts from the grant');
        $s->delete($k);
    }

    public function testExpiryFreesTheLock(): void
    {
        $r = picket_resource('expiry');
        $short = $this->store(['ttl' => 0.3]);
        $k1 = new Key($r);
        $short->save($k1);
        $this->assertEqualsWithDelta(0.3, $k1->getRemainingLifetime(), 0.05);
        usleep(500000);
        $this->assertTrue($k1->isExpired());
        $this->assertFalse($short->exists($k1));
        $other = $this->store();
        $k2 = new Key($r);
        $other->save($k2);
        $this->assertGreaterThan($short->fence($k1), $other->fence($k2));
        $other->delete($k2);
    }

    public function testPutOffExpirationKeepsTheLock(): void
    {
        $r = picket_resource('refresh');
        $s = $this->store(['ttl' => 0.4]);
        $k = new Key($r);
        $s->save($k);
        $f = $s->fence($k);
        $k->resetLifetime();
        $s->putOffExpiration($k, 5.0);
        $this->assertSame($f, $s->fence($k), 'a renewal keeps the fence');
        usleep(700000); // past the first TTL
        $this->assertTrue($s->exists($k));
        $this->expectException(LockConflictedException::class);
        try {
            $this->store()->save(new Key($r));
        } finally {
            $s->delete($k);
        }
    }

    /** A renewal with a shorter TTL: the Key's lifetime follows it down, as picketd's expiry does. */
    public function testShorterRenewalShortensTheLifetime(): void
    {
        $s = $this->store(['ttl' => 10.0]);
        $k = new Key(picket_resource('shorter'));
        $s->save($k);
        $this->assertGreaterThan(9.0, $k->getRemainingLifetime());
        $s->putOffExpiration($k, 1.0);
        $this->assertLessThanOrEqual(1.0, $k->getRemainingLifetime());
        $this->assertLessThanOrEqual(1000, $this->status((string) $k)['ttl_ms']);
        $s->delete($k);
    }

    public function testLostLeaseMakesPutOffExpirationRaise(): void
    {
        $r = picket_resource('lost');
        $s = $this->store(['ttl' => 0.3]);
        $k1 = new Key($r);
        $s->save($k1);
        usleep(500000);
        $other = $this->store();
        $k2 = new Key($r);
        $other->save($k2);
        try {
            $k1->resetLifetime(); // as Lock::refresh does
            $s->putOffExpiration($k1, 5.0);
            $this->fail('renewed a lost lease');
        } catch (LockConflictedException $e) {
            $this->assertSame('lease_lost', $e->getPrevious()->errorCode);
        }
        $this->assertFalse($s->exists($k1));
        $s->delete($k1); // not ours anymore: no error, and it frees nothing
        $this->assertTrue($other->exists($k2));
        $this->assertTrue($this->status($r)['held']);
        $other->delete($k2);
    }

    public function testNamesThatNeedMappingAndNamesThatDoNot(): void
    {
        $s = $this->store();
        $resource = 'App\Service\Inventory::sync#' . bin2hex(random_bytes(4));
        $k = new Key($resource);
        $s->save($k);
        $name = PicketStore::lockName($resource);
        $this->assertStringStartsWith('h.', $name);
        $this->assertSame($name, $s->lock($k));
        $this->assertTrue($this->status($name)['held'], 'held under the mapped name');
        try {
            $this->store()->save(new Key($resource));
            $this->fail('the same resource mapped to another lock');
        } catch (LockConflictedException) {
        }
        $s->delete($k);
        $this->assertFalse($this->status($name)['held']);

        $plain = 'billing.nightly:eu-west-1.' . bin2hex(random_bytes(4)); // ':' goes as %3A
        $kp = new Key($plain);
        $s->save($kp);
        $this->assertSame($plain, $s->lock($kp));
        $st = $this->status($plain);
        $this->assertTrue($st['held']);
        $this->assertSame($plain, $st['lock']);
        $s->delete($kp);
    }

    public function testFenceGrowsBetweenGrants(): void
    {
        $r = picket_resource('fence');
        $s = $this->store();
        $last = 0;
        for ($i = 0; $i < 3; $i++) {
            $k = new Key($r);
            $s->save($k);
            $this->assertGreaterThan($last, $s->fence($k));
            $last = $s->fence($k);
            $s->delete($k);
        }
        // The same key after a release: same lease, a new grant, a higher fence.
        $s->save($k);
        $this->assertGreaterThan($last, $s->fence($k));
        $s->delete($k);
    }

    public function testErrors(): void
    {
        $this->expectException(InvalidTtlException::class);
        try {
            new PicketStore(picket_url(), ['ttl' => 0]);
        } finally {
            // No server at all: LockAcquiringException with the transport error.
            $dead = new PicketStore('http://127.0.0.1:1', ['connect_timeout' => 0.5, 'timeout' => 1]);
            try {
                $dead->save(new Key('x'));
                $this->fail('saved through nothing');
            } catch (LockAcquiringException $e) {
                $this->assertSame('transport', $e->getPrevious()->errorCode);
            }
            // A TTL over picketd's --max-ttl-ms (1 h): 400, LockAcquiringException.
            try {
                $this->store(['ttl' => 7200])->save(new Key(picket_resource('ttl')));
                $this->fail('a 2 h lease');
            } catch (LockAcquiringException $e) {
                $this->assertSame('invalid_argument', $e->getPrevious()->errorCode);
            }
        }
    }
}
