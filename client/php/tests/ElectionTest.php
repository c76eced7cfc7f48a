<?php

declare(strict_types=1);

namespace Picket\Election\Tests;

use Picket\Election\Election;
use Picket\Election\LeaderEvent;
use Picket\Election\Leadership;
use Picket\Lock\Exception\LeaderExistsException;
use Picket\Lock\Exception\LeaseLostException;
use Picket\Lock\Exception\PicketHttpException;
use Picket\Lock\Transport;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\LockConflictedException;

/**
 * Picket\Election against a real picketd (PICKET_URL), with fenced-kv
 * (PICKET_KV_URL) for the terms as fences, and the signed term on the
 * picketd with --fence-key-file (PICKET_AUTH_URL).
 */
final class ElectionTest extends TestCase
{
    /** @var list<Leadership> resigned at the end, so that a failed test leaves no leader behind */
    private array $leads = [];

    protected function tearDown(): void
    {
        foreach ($this->leads as $l) {
            $l->resignQuietly();
        }
        $this->leads = [];
    }

    private function elections(array $o = []): Election
    {
        return new Election(picket_url(), $o);
    }

    private function campaign(string $name, array $opts = [], ?Election $e = null): Leadership
    {
        return $this->leads[] = ($e ?? $this->elections())->campaign($name, $opts);
    }

    /** One fenced-kv write of $value at $key with $headers: [status, error code or null]. */
    private function kvPut(string $key, string $value, array $headers): array
    {
        $c = curl_init(picket_url('PICKET_KV_URL') . '/kv/' . $key);
        curl_setopt_array($c, [CURLOPT_CUSTOMREQUEST => 'PUT', CURLOPT_RETURNTRANSFER => true, CURLOPT_POSTFIELDS => $value,
            CURLOPT_HTTPHEADER => array_merge(['Expect:'], $headers)]);
        $raw = curl_exec($c);
        $this->assertIsString($raw, 'fenced-kv: ' . curl_error($c));

        return [curl_getinfo($c, CURLINFO_RESPONSE_CODE), json_decode($raw, true)['error']['code'] ?? null];
    }

    public function testCampaignTermAndValue(): void
    {
        $name = picket_resource('elect');
        $e = $this->elections(['owner' => 'php-a']);
        $this->assertNull($e->leader($name)['leader'], 'nobody leads a new election');
        $l = $this->campaign($name, ['ttl_ms' => 5000, 'value' => '10.0.0.7:8080'], $e);
        $this->assertSame($name, $l->name);
        $this->assertGreaterThan(0, $l->term);
        $this->assertSame('10.0.0.7:8080', $l->value());
        $this->assertSame('php-a', $l->owner);
        $this->assertSame(5000, $l->ttlMs());
        $this->assertMatchesRegularExpression('/^[0-9a-f]{32}$/', $l->lease);
        $this->assertNull($l->fenceToken(), 'no --fence-key-file, no signed term');
        $this->assertSame(['Picket-Lock: ' . $name, 'Picket-Fence: ' . $l->term], $l->fenceHeaders());
        // the deadline: sent + 5 s - (1% + 2 ms), on hrtime's clock
        $this->assertGreaterThan(4.8, $l->remaining());
        $this->assertLessThanOrEqual(4.948, $l->remaining());
        $this->assertEqualsWithDelta(hrtime(true) / 1e9 + $l->remaining(), $l->deadline(), 0.01);
        $st = $e->leader($name);
        $this->assertSame($l->term, $st['leader']['term']);
        $this->assertSame('10.0.0.7:8080', $st['leader']['value']);
        $this->assertSame('php-a', $st['leader']['owner']);
        $this->assertSame($l->term, $st['term']);
        $this->assertArrayNotHasKey('lease', $st['leader']);
        // a retry with the same lease while leading: the same leadership
        $again = $e->campaign($name, ['ttl_ms' => 5000, 'lease' => $l->lease]);
        $this->assertSame($l->term, $again->term);
        $this->assertTrue($l->isLeader());
        $this->assertTrue($l->resign());
        $this->assertFalse($l->resign(), 'twice');
        $this->assertFalse($again->resign(), 'the same lease: already resigned');
        $this->assertNull($e->leader($name)['leader']);
        $this->assertFalse($l->isLeader());
    }

    public function testLeaderExists(): void
    {
        $name = picket_resource('exists');
        $this->campaign($name, ['ttl_ms' => 10000], $this->elections(['owner' => 'first']));
        try {
            $this->elections()->campaign($name);
            $this->fail('a second leader');
        } catch (LeaderExistsException $e) {
            $this->assertInstanceOf(LockConflictedException::class, $e);
            $this->assertSame('first', $e->owner());
            $this->assertGreaterThan(9000, $e->retryAfterMs());
            $this->assertSame('leader_exists', $e->getPrevious()->errorCode);
            $this->assertSame(409, $e->getPrevious()->status);
        }
        // a wait that runs out: still leader_exists, after the whole wait,
        // asked of picketd in waits of at most max_wait_ms (100 ms here)
        $t0 = hrtime(true);
        try {
            $this->elections(['max_wait_ms' => 100])->campaign($name, ['wait_ms' => 300]);
            $this->fail('a second leader after a wait');
        } catch (LeaderExistsException) {
            $this->assertGreaterThanOrEqual(0.29, (hrtime(true) - $t0) / 1e9);
        }
    }

    public function testWaitingCandidateLeadsAtResign(): void
    {
        $name = picket_resource('handover');
        $p = proc_open([PHP_BINARY, __DIR__ . '/leader.php', picket_url(), $name, '400'], [1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        $this->assertIsResource($p);
        $line = (string) fgets($pipes[1]);
        $this->assertMatchesRegularExpression('/^leads \d+$/', trim($line), 'leader.php leads');
        $first = (int) substr(trim($line), 6);
        // the leader holds a 30 s lease: only its resign can hand over in time
        $l = $this->campaign($name, ['ttl_ms' => 5000, 'wait_ms' => 10000, 'owner' => 'candidate']);
        $got = microtime(true);
        $rest = stream_get_contents($pipes[1]);
        fclose($pipes[1]);
        $this->assertSame(0, proc_close($p));
        $this->assertMatchesRegularExpression('/^resigning (\d+\.\d+) candidates=(\d+)\nresigned$/', trim($rest));
        preg_match('/^resigning (\d+\.\d+) candidates=(\d+)/', $rest, $m);
        $this->assertSame('1', $m[2], 'the candidate waited in picketd (wait_ms), it did not poll');
        $this->assertGreaterThan($first, $l->term, 'the next leader has a higher term');
        $this->assertLessThan(1.0, $got - (float) $m[1], 'led within a second of the resign (picketd: milliseconds)');
        $this->assertGreaterThan(4.0, $l->remaining(), 'the deadline counts from the grant');
        $this->assertSame('candidate', $this->elections()->leader($name)['leader']['owner']);
    }

    public function testProclaimKeepsTheTerm(): void
    {
        $name = picket_resource('proclaim');
        $e = $this->elections();
        $l = $this->campaign($name, ['ttl_ms' => 8000, 'value' => 'v1'], $e);
        $this->assertSame($l, $l->proclaim('v2'));
        $this->assertSame('v2', $l->value());
        $st = $e->leader($name);
        $this->assertSame($l->term, $st['leader']['term']);
        $this->assertSame('v2', $st['leader']['value']);
        $this->assertSame($l->term, $st['term'], 'no new term');
        $l->proclaim(null);
        $this->assertNull($l->value());
        $this->assertNull($e->leader($name)['leader']['value']);
        $l->proclaim('v3', 3000);
        $this->assertSame(3000, $l->ttlMs());
        $this->assertLessThanOrEqual(3.0, $l->remaining());
        try {
            $l->proclaim("bad\nvalue");
            $this->fail('a control character');
        } catch (InvalidArgumentException) {
        }
        $this->expectException(InvalidArgumentException::class);
        $l->proclaim(str_repeat('x', 4097));
    }

    /** A renewal with a shorter TTL: the local deadline follows it down (picketd's expiry). */
    public function testShorterRenewalMovesTheDeadlineBack(): void
    {
        $l = $this->campaign(picket_resource('shorter'), ['ttl_ms' => 10000]);
        $this->assertGreaterThan(9.0, $l->remaining());
        $l->renew(1000);
        $this->assertSame(1000, $l->ttlMs());
        $this->assertLessThanOrEqual(1.0, $l->remaining());
        $l->renew(10000);
        $this->assertGreaterThan(9.0, $l->remaining());
        $l->proclaim('shorter', 1000);
        $this->assertLessThanOrEqual(1.0, $l->remaining());
        $this->assertTrue($l->resign());
    }

    public function testObserveYieldsTheStateThenChanges(): void
    {
        $name = picket_resource('observe');
        $e = $this->elections(['owner' => 'obs-a']);
        $a = $this->campaign($name, ['ttl_ms' => 10000, 'value' => 'a1'], $e);
        // idle 3 s: an event that never comes fails the test, not the suite's timeout
        $events = $this->elections()->observe($name, ['idle' => 3]);
        /** @var LeaderEvent $ev */
        $ev = $events->current();
        $this->assertInstanceOf(LeaderEvent::class, $ev);
        $this->assertSame($name, $ev->election);
        $this->assertSame($a->term, $ev->leaderTerm(), 'the first event is the state now');
        $this->assertSame('a1', $ev->value());
        $this->assertSame('obs-a', $ev->owner());
        $a->proclaim('a2');
        $events->next();
        $ev = $events->current();
        $this->assertSame($a->term, $ev->leaderTerm(), 'a proclaim: the same term');
        $this->assertSame('a2', $ev->value());
        $a->renew();
        $a->resign();
        $events->next();
        $ev = $events->current();
        $this->assertNull($ev->leader, 'leader null at a resign (a renewal sends nothing)');
        $this->assertNull($ev->leaderTerm());
        $this->assertSame($a->term, $ev->term, 'the last term issued');
        $b = $this->campaign($name, ['ttl_ms' => 10000, 'value' => 'b1', 'owner' => 'obs-b']);
        $events->next();
        $ev = $events->current();
        $this->assertSame($b->term, $ev->leaderTerm());
        $this->assertSame('b1', $ev->value());
        $this->assertSame('obs-b', $ev->owner());
        $this->assertGreaterThan($a->term, $ev->term);
        $this->assertIsInt($ev->time);
        unset($events); // closes the stream
        // a stream that cannot open: its error, when the generator starts
        $this->expectException(\Symfony\Component\Lock\Exception\LockStorageException::class);
        (new Election(picket_url('PICKET_AUTH_URL'), ['token' => 'pkt_wrong']))->observe($name)->current();
    }

    public function testServerSentEventsParsing(): void
    {
        $buf = "event: leader\ndata: {\"a\":1}\n\n: a comment\n\nevent: heartbeat\ndata: {}\n\n"
            . "event: leader\ndata:x\ndata: y\n\nevent: leader\ndata: {\"part";
        $this->assertSame(['leader', '{"a":1}'], Transport::sseEvent($buf));
        $this->assertSame(['heartbeat', '{}'], Transport::sseEvent($buf));
        $this->assertSame(['leader', "x\ny"], Transport::sseEvent($buf));
        $this->assertNull(Transport::sseEvent($buf), 'an event not complete yet');
        $buf .= "ial\":2}\n\n";
        $this->assertSame(['leader', '{"partial":2}'], Transport::sseEvent($buf));
        $this->assertSame('', $buf);
    }

    public function testLossAfterBreak(): void
    {
        $name = picket_resource('break');
        $l = $this->campaign($name, ['ttl_ms' => 600]);
        $this->assertGreaterThan(0.0, $l->ensureLeader());
        [$status, $body] = picket_request('POST', '/v1/elections/' . rawurlencode($name) . '/break');
        $this->assertSame(200, $status);
        $this->assertTrue($body['broken']);
        $this->assertGreaterThan($l->term, $body['term'], 'the term moves past the deposed leader');
        usleep(250000); // a third of the TTL: ensureLeader() renews, and hears lease_lost
        try {
            $l->ensureLeader();
            $this->fail('still the leader after a break');
        } catch (LeaseLostException $e) {
            $this->assertInstanceOf(PicketHttpException::class, $e->getPrevious());
            $this->assertSame('lease_lost', $e->getPrevious()->errorCode);
        }
        $this->assertFalse($l->isLeader());
        $this->assertSame(0.0, $l->remaining());
        try {
            $l->proclaim('x');
            $this->fail('a deposed leader proclaimed');
        } catch (LeaseLostException) {
        }
        $this->assertFalse($l->resign(), 'nothing to resign');
        $next = $this->campaign($name, ['ttl_ms' => 5000]);
        $this->assertGreaterThan($body['term'], $next->term);
    }

    public function testLossAfterExpiry(): void
    {
        $name = picket_resource('expiry');
        $l = $this->campaign($name, ['ttl_ms' => 300]);
        $this->assertTrue($l->isLeader());
        usleep(400000); // past the TTL without a renewal: a paused process
        $next = $this->campaign($name, ['ttl_ms' => 5000]);
        $this->assertGreaterThan($l->term, $next->term);
        try {
            $l->ensureLeader();
            $this->fail('still the leader past its deadline');
        } catch (LeaseLostException $e) {
            $this->assertStringContainsString('deadline', $e->getMessage());
        }
        $this->assertFalse($l->isLeader());
        $this->expectException(LeaseLostException::class);
        $l->renew();
    }

    public function testEnsureLeaderRenewsWhenDue(): void
    {
        $name = picket_resource('keep');
        $l = $this->campaign($name, ['ttl_ms' => 600]);
        for ($i = 0; $i < 8; $i++) { // 1.2 s, twice the TTL, in units of work of 150 ms
            $this->assertGreaterThan(0.2, $l->ensureLeader(), "unit $i");
            usleep(150000);
        }
        $this->assertTrue($l->isLeader());
        $this->assertNull($l->lastError());
        $this->assertSame($l->term, $this->elections()->leader($name)['leader']['term'], 'picketd kept it too');
    }

    public function testTermsStrictlyIncrease(): void
    {
        $name = picket_resource('terms');
        $e = $this->elections();
        $prev = 0;
        for ($i = 0; $i < 4; $i++) {
            $l = $this->campaign($name, ['ttl_ms' => 5000], $e);
            $this->assertGreaterThan($prev, $l->term, "campaign $i");
            $this->assertSame($l->term, $e->leader($name)['term']);
            $prev = $l->term;
            if ($i % 2 === 0) {
                $l->resign();
            } else {
                [$status] = picket_request('POST', '/v1/elections/' . rawurlencode($name) . '/break');
                $this->assertSame(200, $status);
            }
        }
    }

    public function testStaleTermRefusedByFencedKv(): void
    {
        $name = picket_resource('fenced');
        $key = 'php-election-' . bin2hex(random_bytes(4));
        $a = $this->campaign($name, ['ttl_ms' => 5000]);
        $old = $a->fenceHeaders();
        $this->assertSame([200, null], $this->kvPut($key, 'by a', $old));
        $a->resign();
        $b = $this->campaign($name, ['ttl_ms' => 5000]);
        $this->assertSame([200, null], $this->kvPut($key, 'by b', $b->fenceHeaders()));
        $this->assertSame([409, 'stale_fence'], $this->kvPut($key, 'by a again', $old), 'the deposed leader');
    }

    public function testSignedTerm(): void
    {
        $e = new Election(picket_url('PICKET_AUTH_URL'), ['token' => picket_url('PICKET_TEST_TOKEN')]);
        $l = $this->campaign(picket_resource('signed'), ['ttl_ms' => 5000], $e);
        $this->assertMatchesRegularExpression('/^v2\.lock\.k1\.[0-9a-f]{64}$/', $l->fenceToken());
        $this->assertSame('Picket-Fence-Token: ' . $l->fenceToken(), $l->fenceHeaders()[2]);
        $l->renew();
        $this->assertNotNull($l->fenceToken());
    }

    public function testNames(): void
    {
        $this->assertSame('scheduler', Election::electionName('scheduler'));
        $this->assertSame('h.' . substr(hash('sha256', 'App\Jobs\Scheduler'), 0, 32), Election::electionName('App\Jobs\Scheduler'));
        $this->assertSame(197, strlen(Election::electionName(str_repeat('e', 197))));
        $this->assertSame('/v1/elections/a%3Ab', Election::path('a:b', ''));
        try {
            Election::electionName(str_repeat('e', 198));
            $this->fail('a 198-byte election name');
        } catch (InvalidArgumentException) {
        }
        try {
            $this->elections()->campaign('x', ['ttl' => 5]);
            $this->fail('an unknown option');
        } catch (InvalidArgumentException) {
        }
        $this->expectException(InvalidArgumentException::class);
        $this->elections()->campaign('x', ['lease' => 'ABC']);
    }
}
