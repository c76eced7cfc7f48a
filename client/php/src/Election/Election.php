<?php

declare(strict_types=1);

namespace Picket\Election;

use Picket\Lock\Exception\LeaderExistsException;
use Picket\Lock\Exception\PicketHttpException;
use Picket\Lock\PicketStore;
use Picket\Lock\Transport;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockStorageException;

/**
 * Leader elections on picketd (/v1/elections/{name}, docs/elections.md):
 * one leader among replicas, whose term is a fence.
 *
 *     $elections = new Election('http://127.0.0.1:7070');
 *     $lead = $elections->campaign('nightly-scheduler', ['ttl_ms' => 10000, 'wait_ms' => 60000]);
 *     while ($lead->isLeader()) {          // renews when due; false once lost
 *         $kv->put('next-run', $job, $lead->fenceHeaders());
 *     }
 *     $lead->resign();
 *
 * campaign() gives a Leadership: its term is the fence of every write
 * (Picket-Lock: NAME, Picket-Fence: TERM). PHP has no thread to renew in
 * the background, so the leader renews as it works: call ensureLeader()
 * (or isLeader()) before each unit of work. It renews when a third of the
 * TTL has passed since the last renewal and throws a LeaseLostException
 * once the leadership is lost (picketd said lease_lost: broken, expired,
 * another leader) or its local deadline passed. A unit of work must fit
 * in the TTL left (ensureLeader() returns it), and every write carries
 * the term all the same: fenced storage refuses a deposed leader's.
 *
 * Errors are symfony/lock's exceptions, as PicketStore throws them, with a
 * PicketHttpException (status, errorCode) as the previous exception:
 *   campaign          409 leader_exists (no wait, or the wait ran out) ->
 *                     LeaderExistsException (a LockConflictedException);
 *                     anything else -> LockAcquiringException
 *   renew, proclaim,  409 lease_lost, or past the local deadline ->
 *   ensureLeader      LeaseLostException (a LockConflictedException);
 *                     anything else -> LockStorageException (ensureLeader
 *                     keeps it and tries again at its next call, until
 *                     the deadline)
 *   resign            409 lease_lost -> false; else LockReleasingException
 *   leader, observe   LockStorageException
 *   any               a bad name, option or value -> InvalidArgumentException
 */
final class Election
{
    /** An election name is a lock name of at most 197 bytes (picketd keeps it as the lock /e/NAME). */
    public const MAX_NAME = 197;
    /** A leader's value: at most 4096 bytes of UTF-8 without control characters. */
    public const MAX_VALUE = 4096;

    private Transport $http;
    private string $owner;
    private int $maxWaitMs;

    /**
     * @param string $url     picketd's base URL, e.g. http://127.0.0.1:7070
     * @param array  $options timeout, connect_timeout, token, cacert, owner,
     *                        retries, max_wait_ms: as PicketStore's (see
     *                        client/php/README.md)
     */
    public function __construct(string $url, array $options = [])
    {
        $known = ['timeout', 'connect_timeout', 'token', 'cacert', 'owner', 'retries', 'max_wait_ms'];
        $unknown = array_diff(array_keys($options), $known);
        if ($unknown) {
            throw new InvalidArgumentException(sprintf('Election: unknown option(s) "%s"; known: %s.',
                implode('", "', $unknown), implode(', ', $known)));
        }
        $this->http = new Transport($url, $options, 'Election', InvalidArgumentException::class);
        $this->owner = Transport::owner($options);
        $this->maxWaitMs = (int) ($options['max_wait_ms'] ?? 60000);
        if ($this->maxWaitMs < 1) {
            throw new InvalidArgumentException('Election: max_wait_ms must be at least 1.');
        }
    }

    /**
     * The picket name of an election: PicketStore::lockName($resource) (a
     * valid lock name as it is, any other string "h." + 32 hex of its
     * SHA-256), which must come to at most 197 bytes (a mapped name always
     * does); InvalidArgumentException otherwise.
     */
    public static function electionName(string $resource): string
    {
        return PicketStore::boundedName($resource, self::MAX_NAME, 'election', InvalidArgumentException::class);
    }

    /**
     * Becomes the leader of election $name, or waits as a candidate.
     *
     * @param array $opts ttl_ms (the lease, default 30000), wait_ms (how
     *                    long to wait as a candidate, default 0: a leader
     *                    is a LeaderExistsException at once; picketd is
     *                    asked in waits of at most max_wait_ms), owner
     *                    (default the Election's), value (published with
     *                    the leadership; null: none), lease (32 lowercase
     *                    hex of your own: a retry with it while leading is
     *                    the same leadership; default random)
     * @throws LeaderExistsException when another leads and the wait ran out
     */
    public function campaign(string $name, array $opts = []): Leadership
    {
        $known = ['ttl_ms', 'wait_ms', 'owner', 'value', 'lease'];
        $unknown = array_diff(array_keys($opts), $known);
        if ($unknown) {
            throw new InvalidArgumentException(sprintf('Election::campaign: unknown option(s) "%s"; known: %s.',
                implode('", "', $unknown), implode(', ', $known)));
        }
        $ttlMs = self::ms($opts['ttl_ms'] ?? 30000, 'ttl_ms', 1);
        $waitMs = self::ms($opts['wait_ms'] ?? 0, 'wait_ms', 0);
        $lease = $opts['lease'] ?? bin2hex(random_bytes(16));
        if (!is_string($lease) || !preg_match('/^[0-9a-f]{32}$/D', $lease)) {
            throw new InvalidArgumentException('Election::campaign: lease must be 32 lowercase hex digits.');
        }
        $body = ['ttl_ms' => $ttlMs, 'lease' => $lease, 'owner' => mb_strcut((string) ($opts['owner'] ?? $this->owner), 0, 128)];
        if (($opts['value'] ?? null) !== null) {
            $body['value'] = self::checkValue($opts['value']);
        }
        $until = hrtime(true) + $waitMs * 1000000;
        $waited = false;
        while (true) {
            $w = (int) min($this->maxWaitMs, max(0, intdiv($until - hrtime(true), 1000000)));
            unset($body['wait_ms']);
            if ($w > 0) {
                $body['wait_ms'] = $w;
                $waited = true;
            }
            $sent = hrtime(true);
            try {
                [$status, $doc] = $this->http->call('POST', self::path($name, 'campaign'), $body, $w);
            } catch (PicketHttpException $e) {
                throw new LockAcquiringException(sprintf('Failed to campaign for the "%s" election: %s', $name, $e->getMessage()), 0, $e);
            }
            if ($status === 200) {
                break;
            }
            $err = Transport::error($status, $doc);
            if ($status === 409 && $err->errorCode === 'leader_exists') {
                if ($w > 0 && hrtime(true) < $until) {
                    continue; // this wait ended with the leader still there: wait on
                }
                throw new LeaderExistsException(sprintf('The "%s" election has a leader: %s (its lease ends in at most %d ms).',
                    $name, $err->owner ?? 'another', $err->retryAfterMs ?? 0), 0, $err);
            }
            throw new LockAcquiringException(sprintf('Failed to campaign for the "%s" election: %s', $name, $err->getMessage()), 0, $err);
        }
        $lead = new Leadership($this->http, $doc, $sent);
        // A waited grant was made somewhere between send and reply: when that
        // gap is over a tenth of the TTL, renew now so that the deadline
        // counts from a request sent after the grant (as PicketStore does).
        if ($waited && (hrtime(true) - $sent) / 1e6 > $lead->ttlMs() / 10) {
            try {
                $lead->renew();
            } catch (\Exception $e) {
                if (!$lead->isLeader()) {
                    $lead->resignQuietly();
                    throw $e;
                }
            }
        }

        return $lead;
    }

    /**
     * Who leads now (GET /v1/elections/{name}): ['election' => NAME,
     * 'leader' => null or ['term', 'value', 'owner', 'since', 'ttl_ms'],
     * 'term' => the last term issued (0: never), 'candidates' => waiting on
     * this picketd]. Never the lease.
     */
    public function leader(string $name): array
    {
        try {
            [$status, $doc] = $this->http->call('GET', self::path($name, ''), null);
        } catch (PicketHttpException $e) {
            throw new LockStorageException(sprintf('Failed to read the "%s" election: %s', $name, $e->getMessage()), 0, $e);
        }
        if ($status !== 200) {
            throw new LockStorageException(sprintf('Failed to read the "%s" election.', $name), 0, Transport::error($status, $doc));
        }

        return $doc;
    }

    /**
     * The election's leader events (GET /v1/elections/{name}/observe,
     * Server-Sent Events), as a Generator of LeaderEvent: the first is the
     * state now, then one per change of leader or value (leader null when
     * nobody leads; a handover after a resign is null, then the new
     * leader). Heartbeats are not yielded. It runs until picketd ends the
     * stream; break out of the foreach to stop (the connection closes).
     *
     * @param array $opts idle (seconds without a byte, heartbeats included,
     *                    before the stream counts as broken; default 60)
     * @return \Generator<int, LeaderEvent>
     */
    public function observe(string $name, array $opts = []): \Generator
    {
        $path = self::path($name, 'observe');
        $idle = (float) ($opts['idle'] ?? 60.0);
        try {
            foreach ($this->http->stream($path, $idle) as [$type, $data]) {
                if ($type !== 'leader') {
                    continue;
                }
                $doc = json_decode($data, true);
                if (!is_array($doc)) {
                    throw new PicketHttpException(sprintf('%s: a leader event whose data is not a JSON object', $path), 200, 'bad_reply');
                }
                yield new LeaderEvent($doc);
            }
        } catch (PicketHttpException $e) {
            throw new LockStorageException(sprintf('Failed to observe the "%s" election: %s', $name, $e->getMessage()), 0, $e);
        }
    }

    /** @internal /v1/elections/{NAME}[/{verb}], NAME checked and percent-encoded. */
    public static function path(string $name, string $verb): string
    {
        $p = '/v1/elections/' . rawurlencode(self::electionName($name));

        return $verb === '' ? $p : $p . '/' . $verb;
    }

    /** @internal A leader's value: null, or a string picketd accepts (checked here, for a clear message). */
    public static function checkValue(mixed $value): ?string
    {
        if ($value === null) {
            return null;
        }
        if (!is_string($value)) {
            throw new InvalidArgumentException(sprintf("A leader's value is a string or null, not %s.", get_debug_type($value)));
        }
        if (strlen($value) > self::MAX_VALUE || !preg_match('//u', $value) || preg_match('/[\x{0}-\x{1f}\x{7f}-\x{9f}]/u', $value)) {
            throw new InvalidArgumentException(sprintf("A leader's value is at most %d bytes of UTF-8 without control characters.", self::MAX_VALUE));
        }

        return $value;
    }

    /** @internal A whole number of milliseconds, at least $min. */
    public static function ms(mixed $v, string $what, int $min): int
    {
        if (!is_int($v) || $v < $min) {
            throw new InvalidArgumentException(sprintf('%s must be an integer of at least %d (ms), not %s.', $what, $min, var_export($v, true)));
        }

        return $v;
    }
}
