<?php

declare(strict_types=1);

namespace Picket\Lock;

use Picket\Lock\Exception\PicketHttpException;
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
 */
final class PicketStore implements BlockingStoreInterface
{
    /** Prefix of mapped names: "h." + the first 32 hex digits of sha256(resource). */
    public const MAPPED_PREFIX = 'h.';

    private const LEASE = self::class . '.lease';
    private const GRANT = self::class . '.grant';

    private string $url;
    private float $ttl;
    private float $timeout;
    private float $connectTimeout;
    private ?string $token;
    private ?string $cacert;
    private ?string $owner;
    private int $maxWaitMs;
    private int $retries;
    /** @var \CurlHandle|null one handle for every call, so the connection is kept alive */
    private $curl = null;

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
     *                        (retries of a call that got no reply, default 1)
     */
    public function __construct(string $url, array $options = [])
    {
        $known = ['ttl', 'timeout', 'connect_timeout', 'token', 'cacert', 'owner', 'max_wait_ms', 'retries'];
        $unknown = array_diff(array_keys($options), $known);
        if ($unknown) {
            throw new InvalidArgumentException(sprintf('PicketStore: unknown option(s) "%s"; known: %s.',
                implode('", "', $unknown), implode(', ', $known)));
        }
        if (!preg_match('#^https?://[^/]+#', $url)) {
            throw new InvalidArgumentException(sprintf('PicketStore: "%s" is not an http:// or https:// URL.', $url));
        }
        $this->url = rtrim($url, '/');
        $this->ttl = (float) ($options['ttl'] ?? 300.0);
        if ($this->ttl <= 0) {
            throw new InvalidTtlException(sprintf('"%s()" expects a strictly positive TTL. Got %s.', __METHOD__, $this->ttl));
        }
        $this->timeout = (float) ($options['timeout'] ?? 10.0);
        $this->connectTimeout = (float) ($options['connect_timeout'] ?? 5.0);
        if ($this->timeout <= 0 || $this->connectTimeout <= 0) {
            throw new InvalidArgumentException('PicketStore: timeout and connect_timeout must be positive.');
        }
        $env = getenv('PICKET_TOKEN');
        $token = $options['token'] ?? (is_string($env) && $env !== '' ? $env : null);
        $this->token = $token === null ? null : trim((string) $token);
        if ($this->token !== null && !preg_match('/^[\x21-\x7e]+$/', $this->token)) {
            throw new InvalidArgumentException('PicketStore: the token must be printable ASCII without spaces.');
        }
        $this->cacert = $options['cacert'] ?? null;
        $owner = $options['owner'] ?? sprintf('php@%s pid %d', gethostname() ?: 'localhost', getmypid());
        $this->owner = $owner === null ? null : mb_strcut((string) $owner, 0, 128);
        $this->maxWaitMs = (int) ($options['max_wait_ms'] ?? 60000);
        if ($this->maxWaitMs < 1) {
            throw new InvalidArgumentException('PicketStore: max_wait_ms must be at least 1.');
        }
        $this->retries = max(0, (int) ($options['retries'] ?? 1));
    }

    public function __destruct()
    {
        if ($this->curl !== null) {
            curl_close($this->curl);
        }
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

    /** The picket lock name the Key is held under (Picket-Lock). */
    public function lock(Key $key): string
    {
        return self::lockName((string) $key);
    }

    public function save(Key $key)
    {
        $key->reduceLifetime($this->ttl);
        $this->acquire($key, 0);
        $this->checkNotExpired($key);
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
        while (true) {
            $t0 = microtime(true);
            try {
                $this->acquire($key, $this->maxWaitMs, (int) ceil($this->ttl * 1000));
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
        $name = self::lockName((string) $key);
        try {
            [$status, $body] = $this->call('POST', $name, 'renew',
                ['lease' => $this->lease($key), 'ttl_ms' => max(1, (int) ceil($ttl * 1000))]);
        } catch (PicketHttpException $e) {
            throw new LockStorageException(sprintf('Failed to renew the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200) {
            $this->keepGrant($key, $name, $body);
        } elseif ($status === 409 && self::code($body) === 'lease_lost') {
            $key->removeState(self::GRANT);
            throw new LockConflictedException(sprintf('The "%s" lock was lost: its lease expired or another holder has it.', $key),
                0, self::error($status, $body));
        } else {
            throw new LockStorageException(sprintf('Failed to renew the "%s" lock.', $key), 0, self::error($status, $body));
        }
        $this->checkNotExpired($key);
    }

    public function delete(Key $key)
    {
        if (!$key->hasState(self::GRANT)) {
            return;
        }
        try {
            [$status, $body] = $this->call('POST', self::lockName((string) $key), 'release', ['lease' => $this->lease($key)]);
        } catch (PicketHttpException $e) {
            throw new LockReleasingException(sprintf('Failed to release the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200 || ($status === 409 && self::code($body) === 'lease_lost')) {
            $key->removeState(self::GRANT);

            return;
        }
        throw new LockReleasingException(sprintf('Failed to release the "%s" lock.', $key), 0, self::error($status, $body));
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
        $name = self::lockName((string) $key);
        try {
            [$status, $body] = $this->call('POST', $name, 'renew', ['lease' => $this->lease($key), 'ttl_ms' => $ms]);
        } catch (PicketHttpException $e) {
            throw new LockStorageException(sprintf('Failed to check the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200) {
            $this->keepGrant($key, $name, $body);

            return true;
        }
        if ($status === 409 && self::code($body) === 'lease_lost') {
            $key->removeState(self::GRANT);

            return false;
        }
        throw new LockStorageException(sprintf('Failed to check the "%s" lock.', $key), 0, self::error($status, $body));
    }

    /** POST acquire with the Key's lease; keeps the grant or throws. */
    private function acquire(Key $key, int $waitMs, ?int $ttlMs = null): void
    {
        if ($ttlMs === null) {
            $left = $key->getRemainingLifetime() ?? $this->ttl;
            if ($left <= 0) {
                $this->checkNotExpired($key);
            }
            $ttlMs = max(1, (int) ceil($left * 1000));
        }
        $name = self::lockName((string) $key);
        $req = ['ttl_ms' => $ttlMs, 'lease' => $this->lease($key), 'owner' => $this->owner];
        if ($waitMs > 0) {
            $req['wait_ms'] = $waitMs;
        }
        try {
            [$status, $body] = $this->call('POST', $name, 'acquire', $req, $waitMs);
        } catch (PicketHttpException $e) {
            throw new LockAcquiringException(sprintf('Failed to acquire the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($status === 200) {
            $this->keepGrant($key, $name, $body);

            return;
        }
        $err = self::error($status, $body);
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

    /** @return array{lock: string, fence: int, token: ?string} */
    private function grant(Key $key): array
    {
        if (!$key->hasState(self::GRANT)) {
            throw new InvalidArgumentException(sprintf('The "%s" lock is not held through this key: no fence.', $key));
        }

        return $key->getState(self::GRANT);
    }

    private function keepGrant(Key $key, string $name, array $body): void
    {
        if (!isset($body['fence']) || !is_int($body['fence'])) {
            throw new LockStorageException(sprintf('picketd replied without a fence for "%s".', $key));
        }
        $token = isset($body['fence_token']) && is_string($body['fence_token']) ? $body['fence_token'] : null;
        $key->setState(self::GRANT, ['lock' => $name, 'fence' => $body['fence'], 'token' => $token]);
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

    private static function code(array $body): ?string
    {
        $c = $body['error']['code'] ?? null;

        return is_string($c) ? $c : null;
    }

    private static function error(int $status, array $body): PicketHttpException
    {
        $e = $body['error'] ?? [];
        $code = is_string($e['code'] ?? null) ? $e['code'] : 'http_' . $status;
        $msg = is_string($e['message'] ?? null) ? $e['message'] : 'HTTP ' . $status;

        return new PicketHttpException(sprintf('%d %s: %s', $status, $code, $msg), $status, $code,
            is_int($e['retry_after_ms'] ?? null) ? $e['retry_after_ms'] : null,
            is_string($e['owner'] ?? null) ? $e['owner'] : null);
    }

    /**
     * One call: METHOD /v1/locks/{name}/{verb} with a JSON body. Every call
     * is idempotent (the lease is ours), so one that got no reply is retried
     * up to $retries times.
     *
     * @return array{0: int, 1: array} status and decoded JSON body
     * @throws PicketHttpException when no usable reply came
     */
    private function call(string $method, string $name, string $verb, ?array $body, int $waitMs = 0): array
    {
        $url = $this->url . '/v1/locks/' . rawurlencode($name) . ($verb === '' ? '' : '/' . $verb);
        for ($attempt = 0; ; $attempt++) {
            try {
                return $this->http($method, $url, $body, $waitMs);
            } catch (PicketHttpException $e) {
                if ($e->status !== 0 || $attempt >= $this->retries) {
                    throw $e;
                }
            }
        }
    }

    private function http(string $method, string $url, ?array $body, int $waitMs): array
    {
        if ($this->curl === null) {
            $this->curl = curl_init();
            if ($this->curl === false) {
                throw new PicketHttpException('curl_init failed', 0, 'transport');
            }
        } else {
            curl_reset($this->curl); // options only: the live connection stays
        }
        $headers = ['Expect:', 'Accept: application/json'];
        if ($this->token !== null) {
            $headers[] = 'Authorization: Bearer ' . $this->token;
        }
        $opts = [
            CURLOPT_URL => $url,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT_MS => (int) ceil($this->timeout * 1000) + $waitMs,
            CURLOPT_CONNECTTIMEOUT_MS => (int) ceil($this->connectTimeout * 1000),
            CURLOPT_NOSIGNAL => true,
            CURLOPT_FOLLOWLOCATION => false,
            CURLOPT_PROTOCOLS => CURLPROTO_HTTP | CURLPROTO_HTTPS,
        ];
        if ($this->cacert !== null) {
            $opts[CURLOPT_CAINFO] = $this->cacert;
        }
        if ($method === 'GET') {
            $opts[CURLOPT_HTTPGET] = true;
        } else {
            $opts[CURLOPT_CUSTOMREQUEST] = $method;
            $opts[CURLOPT_POSTFIELDS] = json_encode($body ?? new \stdClass(), JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES);
            $headers[] = 'Content-Type: application/json';
        }
        $opts[CURLOPT_HTTPHEADER] = $headers;
        curl_setopt_array($this->curl, $opts);
        $raw = curl_exec($this->curl);
        if ($raw === false) {
            $errno = curl_errno($this->curl);
            throw new PicketHttpException(sprintf('%s %s: %s', $method, $url, curl_error($this->curl)), 0, 'transport',
                null, null, $errno);
        }
        $status = (int) curl_getinfo($this->curl, CURLINFO_RESPONSE_CODE);
        try {
            $json = json_decode((string) $raw, true, 16, JSON_THROW_ON_ERROR);
        } catch (\JsonException) {
            $json = null;
        }
        if (!is_array($json)) {
            throw new PicketHttpException(sprintf('%s %s: HTTP %d with a body that is not a JSON object', $method, $url, $status),
                $status, 'bad_reply');
        }

        return [$status, $json];
    }
}
