<?php

declare(strict_types=1);

namespace Picket\Semaphore\Tests;

use Picket\Lock\Exception\PicketHttpException;
use Picket\Lock\PicketStore;
use Picket\Semaphore\PicketSemaphoreStore;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException;
use Symfony\Component\Semaphore\Exception\RuntimeException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\SemaphoreFactory;

/** PicketSemaphoreStore against a real picketd (PICKET_URL; PICKET_AUTH_URL signs fences). */
final class PicketSemaphoreStoreTest extends TestCase
{
    private function store(array $o = [], string $url = 'PICKET_URL'): PicketSemaphoreStore
    {
        return new PicketSemaphoreStore(picket_url($url), $o);
    }

    /** GET /v1/semaphores/{name} by plain curl, as an operator sees it. */
    private function status(string $name): array
    {
        [$status, $body] = picket_request('GET', '/v1/semaphores/' . rawurlencode($name));
        $this->assertSame(200, $status);

        return $body;
    }

    /** Releases one lease of the Key behind the store's back (an operator, another process). */
    private function releaseBehind(string $name, string $lease): void
    {
        [$status] = picket_request('POST', '/v1/semaphores/' . rawurlencode($name) . '/release', ['lease' => $lease]);
        $this->assertSame(200, $status);
    }

    public function testPermitsFencesAndIdempotentSave(): void
    {
        $s = $this->store(['owner' => 'php-sem']);
        $r = picket_resource('sem');
        $k = new Key($r, 5, 2);
        $s->save($k, 30);
        $p = $s->permits($k);
        $this->assertSame([0, 1], array_column($p, 'permit'));
        foreach ($p as $q) {
            $this->assertSame("$r:permit:{$q['permit']}", $q['lock']);
            $this->assertIsInt($q['fence']);
            $this->assertNull($q['token'], 'no --fence-key-file, no token');
        }
        $st = $this->status($r);
        $this->assertSame([5, 2], [$st['limit'], $st['held']]);
        $this->assertSame(array_column($p, 'fence'), array_column($st['permits'], 'fence'));
        $this->assertSame(['php-sem', 'php-sem'], array_column($st['permits'], 'owner'));
        $this->assertEqualsWithDelta(30000, $st['permits'][0]['ttl_ms'], 2000);

        $s->save($k, 30); // a retry: the same leases, permits and fences
        $this->assertSame($p, $s->permits($k));
        $this->assertSame(2, $this->status($r)['held']);

        $s->putOffExpiration($k, 60);
        $this->assertGreaterThan(50000, $this->status($r)['permits'][1]['ttl_ms']);
        $this->assertTrue($s->exists($k));
        $this->assertLessThanOrEqual(60000, $this->status($r)['permits'][0]['ttl_ms'], 'exists() extends nothing');

        $s->delete($k);
        $this->assertSame([], $s->permits($k));
        $this->assertFalse($s->exists($k));
        $this->assertSame(0, $this->status($r)['held']);
        $s->delete($k); // twice is fine
        $s->save($k, 30); // the same Key again: new grants, higher fences per slot
        $again = $s->permits($k);
        $this->assertGreaterThan($p[0]['fence'], $again[0]['fence']);
        $s->delete($k);
    }

    public function testWeightIsAllOrNothing(): void
    {
        $s = $this->store();
        $r = picket_resource('weight');
        [$a, $b, $c] = [new Key($r, 3, 2), new Key($r, 3, 2), new Key($r, 3, 1)];
        $s->save($a, 30);
        try {
            $s->save($b, 30);
            $this->fail('a key of weight 2 saved with one permit free');
        } catch (SemaphoreAcquiringException $e) {
            $this->assertStringContainsString('semaphore_full', $e->getMessage());
        }
        // b got the third permit, then found the semaphore full: given back
        $this->assertSame(2, $this->status($r)['held']);
        $this->assertFalse($s->exists($b));
        $this->assertSame([], $s->permits($b));
        $s->save($c, 30);
        $this->assertSame(2, $s->permits($c)[0]['permit']);
        $s->delete($a);
        $s->save($b, 30);
        $this->assertSame([0, 1], array_column($s->permits($b), 'permit'));
        $s->delete($b);
        $s->delete($c);
    }

    public function testLimitMismatch(): void
    {
        $s = $this->store();
        $r = picket_resource('limit');
        $a = new Key($r, 2);
        $s->save($a, 30);
        try {
            $s->save(new Key($r, 3), 30);
            $this->fail('saved under another limit');
        } catch (RuntimeException $e) {
            $this->assertNotInstanceOf(SemaphoreAcquiringException::class, $e);
            $prev = $e->getPrevious();
            $this->assertInstanceOf(PicketHttpException::class, $prev);
            $this->assertSame([409, 'limit_mismatch'], [$prev->status, $prev->errorCode]);
        }
        $s->delete($a);
        $s->save($b = new Key($r, 3), 30); // every permit gone: the limit is set anew
        $this->assertSame(3, $this->status($r)['limit']);
        $s->delete($b);
    }

    public function testLostPermit(): void
    {
        $s = $this->store();
        $r = picket_resource('lost');
        $k = new Key($r, 4, 2);
        $s->save($k, 30);
        // One of its two permits ends behind its back: the Key has lost the
        // semaphore, and gives the other permit back.
        $leases = $k->getState(PicketSemaphoreStore::class . '.leases');
        $this->releaseBehind($r, $leases[1]);
        try {
            $s->putOffExpiration($k, 30);
            $this->fail('extended a semaphore with a lost permit');
        } catch (SemaphoreExpiredException $e) {
            $this->assertStringContainsString('was lost', $e->getMessage());
        }
        $this->assertSame(0, $this->status($r)['held']);
        $this->assertFalse($s->exists($k));

        // A permit whose TTL ran out: exists() is false without asking.
        $short = new Key(picket_resource('short'), 1);
        $s->save($short, 0.2);
        usleep(300000);
        $this->assertFalse($s->exists($short));
        $this->expectException(SemaphoreExpiredException::class);
        $s->putOffExpiration($short, 30);
    }

    public function testSemaphoreFactory(): void
    {
        $factory = new SemaphoreFactory($this->store());
        $r = picket_resource('factory');
        $one = $factory->createSemaphore($r, 2, 1, 30);
        $two = $factory->createSemaphore($r, 2, 1, 30);
        $this->assertTrue($one->acquire());
        $this->assertTrue($two->acquire());
        $this->assertFalse($factory->createSemaphore($r, 2)->acquire(), 'a third of two');
        $this->assertTrue($one->isAcquired());
        $one->refresh(45);
        $this->assertEqualsWithDelta(45, $one->getRemainingLifetime(), 1.0);
        $one->release();
        $this->assertFalse($one->isAcquired());
        $three = $factory->createSemaphore($r, 2, 1, 30, false);
        $this->assertTrue($three->acquire());
        $two->release();
        $three->release();
        $this->assertSame(0, $this->status($r)['held']);
    }

    public function testNamesAndArguments(): void
    {
        $this->assertSame(PicketStore::lockName('App\Jobs\Report'), PicketSemaphoreStore::semaphoreName('App\Jobs\Report'));
        $this->assertSame(str_repeat('x', 180), PicketSemaphoreStore::semaphoreName(str_repeat('x', 180)));
        $s = $this->store();
        $k = new Key('App\Jobs\Report', 1);
        $s->save($k, 5);
        $this->assertSame(PicketStore::lockName('App\Jobs\Report') . ':permit:0', $s->permits($k)[0]['lock']);
        $s->delete($k);
        foreach ([fn () => PicketSemaphoreStore::semaphoreName(str_repeat('x', 181)),
                  fn () => $s->save(new Key(picket_resource('ttl'), 1), 0),
                  fn () => new PicketSemaphoreStore(picket_url(), ['ttl' => 3]),
                  fn () => new PicketSemaphoreStore('redis://localhost')] as $i => $bad) {
            try {
                $bad();
                $this->fail("case $i: no InvalidArgumentException");
            } catch (InvalidArgumentException) {
                $this->addToAssertionCount(1);
            }
        }
    }

    public function testSignedFencesOutliveRenewals(): void
    {
        $s = $this->store(['token' => picket_url('PICKET_TEST_TOKEN')], 'PICKET_AUTH_URL');
        $k = new Key(picket_resource('signed'), 3, 2);
        $s->save($k, 30);
        $tokens = array_column($s->permits($k), 'token');
        $this->assertCount(2, $tokens);
        foreach ($tokens as $t) {
            $this->assertMatchesRegularExpression('/^v2\.permit\.k1\.[0-9a-f]{64}$/', $t);
        }
        $s->putOffExpiration($k, 30);
        $this->assertTrue($s->exists($k));
        $this->assertSame($tokens, array_column($s->permits($k), 'token'));
        $s->delete($k);
    }
}
