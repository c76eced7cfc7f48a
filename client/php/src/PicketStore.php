<?php

declare(strict_types=1);

namespace Picket\Lock;

use Picket\Lock\Exception\LeaseLostException;
use Picket\Lock\Exception\PicketHttpException;
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;

/**
 * A symfony/lock store on picketd's HTTP API v1 (proto/openapi.yaml).
 *
 *     $factory = new LockFactory(new PicketStore('http://127.0.0.1:7070'));
 *     $lock = $factory->createLock('inventory-sync');
 *     if ($lock->acquire()) { ...; $lock->release(); }
 *
 * Each Key gets a lease id chosen here (128 random bits, 32 hex) and kept in
 * its state, so a retried save() is idempotent: picketd returns the same
 * grant with the same fence. The grant (lock name, fence, fence_token) is
 * kept in the Key's state too; fence() and fenceToken() read it so that the
 * storage write can carry it (Picket-Lock, Picket-Fence, Picket-Fence-Token).
 *
 * Errors, as symfony's own stores (RedisStore, PdoStore) raise them:
 *   save, waitAndSave     409 lock_held -> LockConflictedException;
 *                         anything else -> LockAcquiringException
 *   putOffExpiration      409 lease_lost -> LockConflictedException (what
 *                         RedisStore throws when its token is gone);
 *                         anything else -> LockStorageException
 *   delete                409 lease_lost is not an error (the lock is not
 *                         ours anymore); anything else -> LockReleasingException
 *   exists                409 lease_lost -> false; anything else ->
 *                         LockStorageException
 *   all                   a Key whose lifetime ran out during the call ->
 *                         LockExpiredException (after a best-effort release)
 * The previous exception is a PicketHttpException with picketd's status and
 * error code (or "transport" when no reply came).
 *
 * Shared (read) locks, symfony's SharedLockStoreInterface: with the option
 * rwlock => true, every Key goes through picketd's read/write lock of its
 * name (/v1/rwlocks): saveRead() and waitAndSaveRead() take a read lease
 * (many readers), save() and waitAndSave() a write lease (alone: it
 * excludes the readers too, as symfony's Lock expects of one store serving
 * acquire() and acquireRead()). A Key holding a read lease that save()s is
 * promoted, one holding a write lease that saveRead()s is demoted, as
 * symfony's RedisStore does; picketd has no atomic upgrade, so this
 * releases the lease and takes one of the other mode (same lease id), and
 * a refused promotion takes the read lease back if it still can. Its fence
 * is checked under lock() = "NAME:rw". Without the option (the default)
 * locks are picketd's plain locks, which Python and C workers of the same
 * name meet; saveRead() then takes an exclusive lock (what symfony's Lock
 * does for a store without read locks), never a weaker one.
 */
final class PicketStore implements BlockingStoreInterface, BlockingSharedLockStoreInterface
{
    /** Prefix of mapped names: "h." + the first 32 hex digits of sha256(resource). */
    public const MAPPED_PREFIX = 'h.';

    private const LEASE = self::class . '.lease';
    private const GRANT = self::class . '.grant';
    /** A read/write lock's name is at most 197 bytes, so that NAME:rw is a lock name. */
    public const MAX_RWLOCK_NAME = 197;

    private Transport $http;
    private float $ttl;
    private string $owner;
    private int $maxWaitMs;
    private bool $rwlock;

    /**
     * @param string $url     picketd's base URL, e.g. http://127.0.0.1:7070
     * @param array  $options ttl (s, default 300: the lease of save() and
     *                        waitAndSave()), timeout (s, default 10: each
     *                        call, plus its wait_ms when it waits),
     *                        connect_timeout (s, default 5), token (bearer
     *                        token for picketd --auth-file; default: the
     *                        PICKET_TOKEN environment variable), cacert (CA
     *                        file for https), owner (label shown to operators,
     *                        default "php@HOST pid PID"), max_wait_ms (the
     *                        server's --max-wait-ms, default 60000), retries
     *                        (retries of a call that got no reply, default 1),
     *                        rwlock (default false: true for shared locks,
     *                        every lock then a picketd rwlock lease; see above)
     */
    public function __construct(string $url, array $options = [])
    {
        $known = ['ttl', 'timeout', 'connect_timeout', 'token', 'cacert', 'owner', 'max_wait_ms', 'retries', 'rwlock'];
        $unknown = array_diff(array_keys($options), $known);
        if ($unknown) {
            throw new InvalidArgumentException(sprintf('PicketStore: unknown option(s) "%s"; known: %s.',
                implode('", "', $unknown), implode(', ', $known)));
        }
        $this->http = new Transport($url, $options, 'PicketStore', InvalidArgumentException::class);
        $this->ttl = (float) ($options['ttl'] ?? 300.0);
        if ($this->ttl <= 0) {
            throw new InvalidTtlException(sprintf('"%s()" expects a strictly positive TTL. Got %s.', __METHOD__, $this->ttl));
        }
        $this->owner = Transport::owner($options);
        $this->maxWaitMs = (int) ($options['max_wait_ms'] ?? 60000);
        if ($this->maxWaitMs < 1) {
            throw new InvalidArgumentException('PicketStore: max_wait_ms must be at least 1.');
        }
        $this->rwlock = (bool) ($options['rwlock'] ?? false);
    }

    /**
     * The picket lock name of a symfony resource. A valid lock name (1..200
     * bytes of [A-Za-z0-9._:-], not "." or "..") is used as it is; any other
     * string (a class name with "\", a path, UTF-8, "") maps to "h." and the
     * first 32 hex digits (128 bits) of its SHA-256. Deterministic: every
     * process and every language computes the same name.
     */
    public static function lockName(string $resource): string
    {
        if ($resource !== '.' && $resource !== '..' && preg_match('/^[A-Za-z0-9._:-]{1,200}$/D', $resource)) {
            return $resource;
        }

        return self::MAPPED_PREFIX . substr(hash('sha256', $resource), 0, 32);
    }

    /**
     * The picket read/write lock name of a symfony resource (the rwlock
     * option): lockName(), which must come to at most 197 bytes (a mapped
     * name always does): a longer valid lock name is an InvalidArgumentException.
     */
    public static function rwlockName(string $resource): string
    {
        return self::boundedName($resource, self::MAX_RWLOCK_NAME, 'read/write lock', InvalidArgumentException::class);
    }

    /**
     * @internal lockName($resource), which must come to at most $max bytes
     * (the names that get a suffix: NAME:rw, NAME:permit:I), else $invalid
     * saying what a picket $what name is.
     *
     * @param class-string<\InvalidArgumentException> $invalid
     */
    public static function boundedName(string $resource, int $max, string $what, string $invalid): string
    {
        $name = self::lockName($resource);
        if (strlen($name) > $max) {
            throw new $invalid(sprintf('A picket %s name is at most %d bytes; "%s" has %d.', $what, $max, $name, strlen($name)));
        }

        return $name;
    }

    /** The fence of the Key's grant, for the storage write (Picket-Fence). */
    public function fence(Key $key): int
    {
        return $this->grant($key)['fence'];
    }

    /** The signed fence (Picket-Fence-Token) when picketd signs fences (--fence-key-file), else null. */
    public function fenceToken(Key $key): ?string
    {
        return $this->grant($key)['token'];
    }

    /**
     * The lock name the Key's fence is checked under (Picket-Lock): the
     * lock's name, or with the rwlock option "NAME:rw".
     */
    public function lock(Key $key): string
    {
        return $this->rwlock ? self::rwlockName((string) $key) . ':rw' : self::lockName((string) $key);
    }

    /** "read" or "write" while the Key holds a rwlock lease, else null (a plain lock, or nothing). */
    public function mode(Key $key): ?string
    {
        return $key->hasState(self::GRANT) ? ($key->getState(self::GRANT)['mode'] ?? null) : null;
    }

    public function save(Key $key)
    {
        $key->reduceLifetime($this->ttl);
        $this->take($key, 'write', 0);
        $this->checkNotExpired($key);
    }

    /** A read lock (shared with other readers); without the rwlock option, save(). */
    public function saveRead(Key $key)
    {
        if (!$this->rwlock) {
            $this->save($key);

            return;
        }
        $key->reduceLifetime($this->ttl);
        $this->take($key, 'read', 0);
        $this->checkNotExpired($key);
    }

    /** waitAndSave() for a read lock; without the rwlock option, waitAndSave(). */
    public function waitAndSaveRead(Key $key)
    {
        $this->waitFor($key, $this->rwlock ? 'read' : 'write');
    }

    /**
     * Blocks until the lock is granted: picketd parks the request (wait_ms,
     * at most max_wait_ms a request) and wakes it at the holder's release or
     * expiry; this loops over such requests, never over a sleep. The lease's
     * lifetime counts from the grant: a grant that came after a wait is
     * renewed at once, so the Key's deadline is never later than picketd's.
     */
    public function waitAndSave(Key $key)
    {
        $this->waitFor($key, 'write');
    }

    /** waitAndSave() in a mode ("write" is the plain lock without the rwlock option). */
    private function waitFor(Key $key, string $mode): void
    {
        while (true) {
            $t0 = microtime(true);
            try {
                $this->take($key, $mode, $this->maxWaitMs, (int) ceil($this->ttl * 1000));
                break;
            } catch (LockConflictedException) {
                // The wait ended with the lock still held: wait again.
            }
        }
        if (microtime(true) - $t0 > 0.05) {
            $key->resetLifetime();
            $this->putOffExpiration($key, $this->ttl);
        } else {
            $key->reduceLifetime($this->ttl - (microtime(true) - $t0));
            $this->checkNotExpired($key);
        }
    }

    public function putOffExpiration(Key $key, float $ttl)
    {
        if ($ttl <= 0) {
            throw new InvalidTtlException(sprintf('"%s()" expects a strictly positive TTL. Got %s.', __METHOD__, $ttl));
        }
        $key->reduceLifetime($ttl);
        if (!$key->hasState(self::GRANT)) {
            throw new LockConflictedException(sprintf('The "%s" lock is not held by this key.', $key));
        }
        $mode = $this->mode($key);
        try {
            [$status, $body] = $this->call('POST', $key, $mode, 'renew',
                ['lease' => $this->lease($key), 'ttl_ms' => max(1, (int) ceil($ttl * 1000))]);
        } catch (PicketHttpException $e) {
            throw new LockStorageException(sprintf('Failed to renew the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200) {
            $this->keepGrant($key, $mode, $body);
        } elseif ($status === 409 && Transport::code($body) === 'lease_lost') {
            $key->removeState(self::GRANT);
            throw new LeaseLostException(sprintf('The "%s" lock was lost: its lease expired or another holder has it.', $key),
                0, Transport::error($status, $body));
        } else {
            throw new LockStorageException(sprintf('Failed to renew the "%s" lock.', $key), 0, Transport::error($status, $body));
        }
        $this->checkNotExpired($key);
    }

    public function delete(Key $key)
    {
        if (!$key->hasState(self::GRANT)) {
            return;
        }
        try {
            [$status, $body] = $this->call('POST', $key, $this->mode($key), 'release', ['lease' => $this->lease($key)]);
        } catch (PicketHttpException $e) {
            throw new LockReleasingException(sprintf('Failed to release the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200 || ($status === 409 && Transport::code($body) === 'lease_lost')) {
            $key->removeState(self::GRANT);

            return;
        }
        throw new LockReleasingException(sprintf('Failed to release the "%s" lock.', $key), 0, Transport::error($status, $body));
    }

    /**
     * True while the Key's lease holds the lock.
     *
     * GET /v1/locks/{name} does not show the lease, only whether the lock is
     * held and its last fence. Comparing that fence with the Key's would be
     * a read, but it is not proof: under --fence-floor none a lost counter
     * (FLUSHALL, a new Redis) issues the same fence numbers again, so
     * another holder's grant can carry our fence; and a token with the
     * "lock" verb but not "read" may not GET. Only the lease (the holder's
     * secret) proves the grant is ours, and the one call that checks a
     * lease without taking the lock is renew. It renews to the Key's own
     * remaining lifetime (rounded down), so exists() never extends the lease
     * past what the Key already believes; it only gives back the few ms by
     * which picketd's deadline was later than ours. A same-lease acquire
     * would take a lock that had been lost and freed, so it is not used.
     */
    public function exists(Key $key)
    {
        if (!$key->hasState(self::GRANT)) {
            return false;
        }
        $left = $key->getRemainingLifetime();
        $ms = $left === null ? (int) ceil($this->ttl * 1000) : (int) floor($left * 1000);
        if ($ms < 1) {
            return false;
        }
        $mode = $this->mode($key);
        try {
            [$status, $body] = $this->call('POST', $key, $mode, 'renew', ['lease' => $this->lease($key), 'ttl_ms' => $ms]);
        } catch (PicketHttpException $e) {
            throw new LockStorageException(sprintf('Failed to check the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200) {
            $this->keepGrant($key, $mode, $body);

            return true;
        }
        if ($status === 409 && Transport::code($body) === 'lease_lost') {
            $key->removeState(self::GRANT);

            return false;
        }
        throw new LockStorageException(sprintf('Failed to check the "%s" lock.', $key), 0, Transport::error($status, $body));
    }

    /**
     * Takes the Key's lock in $mode: a plain lock without the rwlock option
     * (mode "write"), else a rwlock lease. A Key that holds a rwlock lease of
     * the other mode gives it up first (promotion, demotion: picketd grants
     * no second lease to one that holds one); a refused promotion takes the
     * read lease back if it still can (a writer may have come between).
     */
    private function take(Key $key, string $mode, int $waitMs, ?int $ttlMs = null): void
    {
        $mode = $this->rwlock ? $mode : null;
        $held = $this->mode($key);
        if ($mode === null || $held === null || $held === $mode) {
            $this->acquire($key, $mode, $waitMs, $ttlMs);

            return;
        }
        $this->delete($key);
        try {
            $this->acquire($key, $mode, $waitMs, $ttlMs);
        } catch (LockConflictedException $e) {
            if ($held === 'read') {
                try {
                    $this->acquire($key, 'read', 0, $ttlMs);
                } catch (\Exception) {
                    // the read lease is gone too: the Key holds nothing
                }
            }
            throw $e;
        }
    }

    /** POST acquire with the Key's lease; keeps the grant or throws. */
    private function acquire(Key $key, ?string $mode, int $waitMs, ?int $ttlMs = null): void
    {
        if ($ttlMs === null) {
            $left = $key->getRemainingLifetime() ?? $this->ttl;
            if ($left <= 0) {
                $this->checkNotExpired($key);
            }
            $ttlMs = max(1, (int) ceil($left * 1000));
        }
        $req = ['ttl_ms' => $ttlMs, 'lease' => $this->lease($key), 'owner' => $this->owner];
        if ($mode !== null) {
            $req['mode'] = $mode;
        }
        if ($waitMs > 0) {
            $req['wait_ms'] = $waitMs;
        }
        try {
            [$status, $body] = $this->call('POST', $key, $mode, 'acquire', $req, $waitMs);
        } catch (PicketHttpException $e) {
            throw new LockAcquiringException(sprintf('Failed to acquire the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200) {
            $this->keepGrant($key, $mode, $body);

            return;
        }
        $err = Transport::error($status, $body);
        if ($status === 409 && $err->errorCode === 'lock_held') {
            throw new LockConflictedException(sprintf('The "%s" lock is held by %s (free in at most %d ms).',
                $key, $err->owner ?? 'another holder', $err->retryAfterMs ?? 0), 0, $err);
        }
        throw new LockAcquiringException(sprintf('Failed to acquire the "%s" lock: %s', $key, $err->getMessage()), 0, $err);
    }

    private function lease(Key $key): string
    {
        if (!$key->hasState(self::LEASE)) {
            $key->setState(self::LEASE, bin2hex(random_bytes(16)));
        }

        return $key->getState(self::LEASE);
    }

    /** @return array{lock: string, fence: int, token: ?string, mode: ?string} */
    private function grant(Key $key): array
    {
        if (!$key->hasState(self::GRANT)) {
            throw new InvalidArgumentException(sprintf('The "%s" lock is not held through this key: no fence.', $key));
        }

        return $key->getState(self::GRANT);
    }

    /** Keeps a grant or renewal of the Key's lease in mode $mode (null: a plain lock). */
    private function keepGrant(Key $key, ?string $mode, array $body): void
    {
        if (!isset($body['fence']) || !is_int($body['fence'])) {
            throw new LockStorageException(sprintf('picketd replied without a fence for "%s".', $key));
        }
        $token = isset($body['fence_token']) && is_string($body['fence_token']) ? $body['fence_token'] : null;
        $lock = $mode === null ? self::lockName((string) $key)
            : (is_string($body['fence_lock'] ?? null) ? $body['fence_lock'] : self::rwlockName((string) $key) . ':rw');
        $key->setState(self::GRANT, ['lock' => $lock, 'fence' => $body['fence'], 'token' => $token, 'mode' => $mode]);
    }

    private function checkNotExpired(Key $key): void
    {
        if ($key->isExpired()) {
            try {
                $this->delete($key);
            } catch (\Exception) {
                // swallow, so as not to hide the original issue (as symfony's ExpiringStoreTrait)
            }
            throw new LockExpiredException(sprintf('Failed to store the "%s" lock.', $key));
        }
    }

    /**
     * POST or GET /v1/locks/{name}[/{verb}] (mode null) or
     * /v1/rwlocks/{name}[/{verb}] (a rwlock lease) through the transport.
     */
    private function call(string $method, Key $key, ?string $mode, string $verb, ?array $body, int $waitMs = 0): array
    {
        $path = $mode === null ? '/v1/locks/' . rawurlencode(self::lockName((string) $key))
            : '/v1/rwlocks/' . rawurlencode(self::rwlockName((string) $key));

        return $this->http->call($method, $path . ($verb === '' ? '' : '/' . $verb), $body, $waitMs);
    }
}
