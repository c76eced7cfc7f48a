<?php

declare(strict_types=1);

namespace Picket\Semaphore;

use Picket\Lock\Exception\PicketHttpException;
use Picket\Lock\PicketStore;
use Picket\Lock\Transport;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException;
use Symfony\Component\Semaphore\Exception\RuntimeException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Exception\SemaphoreReleasingException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\PersistingStoreInterface;

/**
 * A symfony/semaphore store on picketd's counting semaphores
 * (/v1/semaphores/{name}, proto/openapi.yaml).
 *
 *     $factory = new SemaphoreFactory(new PicketSemaphoreStore('http://127.0.0.1:7070'));
 *     $sem = $factory->createSemaphore('reports', 5);   // at most 5 at once
 *     if ($sem->acquire()) { ...; $sem->release(); }
 *
 * picketd grants one permit per acquire, a lease on a slot with a fence of
 * its own. A Key of weight W holds W permits: save() acquires W leases, all
 * or nothing (when one fails, the ones it got are released). The lease ids
 * are chosen here (128 random bits each) and kept in the Key's state, so a
 * retried save() is idempotent: the same permits and fences. The grants
 * (slot, fence, the lock name a fenced store checks the fence under, the
 * signed fence) are kept there too; permits() reads them for the storage
 * write.
 *
 * Errors, as symfony/semaphore's Semaphore expects them:
 *   save               409 semaphore_full -> SemaphoreAcquiringException
 *                      (Semaphore::acquire() returns false); anything else
 *                      (409 limit_mismatch: live permits were granted under
 *                      another limit; 401, 403, 429, 503, no reply) ->
 *                      RuntimeException
 *   putOffExpiration   no permit held, or one lost (409 lease_lost) ->
 *                      SemaphoreExpiredException (the others are released);
 *                      anything else -> RuntimeException
 *   delete             409 lease_lost is not an error; anything else ->
 *                      SemaphoreReleasingException
 *   exists             409 lease_lost -> false; anything else -> RuntimeException
 * A RuntimeException's previous exception is a PicketHttpException
 * (picketd's status and error code, or "transport").
 */
final class PicketSemaphoreStore implements PersistingStoreInterface
{
    /** picketd's bound on a semaphore name, so that NAME:permit:I is a lock name. */
    public const MAX_NAME = 180;

    private const LEASES = self::class . '.leases';
    private const GRANTS = self::class . '.grants';

    private Transport $http;
    private string $owner;

    /**
     * @param string $url     picketd's base URL, e.g. http://127.0.0.1:7070
     * @param array  $options timeout (s, default 10), connect_timeout (s,
     *                        default 5), token (default: PICKET_TOKEN),
     *                        cacert, owner (default "php@HOST pid PID"),
     *                        retries (default 1): as PicketStore's
     */
    public function __construct(string $url, array $options = [])
    {
        $known = ['timeout', 'connect_timeout', 'token', 'cacert', 'owner', 'retries'];
        $unknown = array_diff(array_keys($options), $known);
        if ($unknown) {
            throw new InvalidArgumentException(sprintf('PicketSemaphoreStore: unknown option(s) "%s"; known: %s.',
                implode('", "', $unknown), implode(', ', $known)));
        }
        $this->http = new Transport($url, $options, 'PicketSemaphoreStore', InvalidArgumentException::class);
        $this->owner = Transport::owner($options);
    }

    /**
     * The picket semaphore name of a symfony resource: PicketStore::lockName()
     * (a valid lock name as it is, anything else "h." + 32 hex digits of its
     * SHA-256, as every picket client maps names), which must come to at
     * most 180 bytes: a longer valid lock name is an InvalidArgumentException.
     */
    public static function semaphoreName(string $resource): string
    {
        return PicketStore::boundedName($resource, self::MAX_NAME, 'semaphore', InvalidArgumentException::class);
    }

    /**
     * The Key's permits, lowest slot first, for the storage write: permit
     * (the slot), fence, lock (the lock name a fenced store checks the fence
     * under, "NAME:permit:I": send it as Picket-Lock) and token (the signed
     * fence with --fence-key-file, else null). Empty when it holds none.
     *
     * @return list<array{permit: int, fence: int, lock: string, token: ?string}>
     */
    public function permits(Key $key): array
    {
        if (!$key->hasState(self::GRANTS)) {
            return [];
        }
        $out = [];
        foreach ($key->getState(self::GRANTS)['permits'] as $p) {
            unset($p['lease']);
            $out[] = $p;
        }
        usort($out, static fn (array $a, array $b): int => $a['permit'] <=> $b['permit']);

        return $out;
    }

    public function save(Key $key, float $ttlInSecond)
    {
        $ttlMs = self::ttlMs($ttlInSecond, __METHOD__);
        $name = self::semaphoreName((string) $key);
        $t0 = microtime(true);
        $got = [];
        foreach ($this->leases($key) as $lease) {
            $req = ['limit' => $key->getLimit(), 'ttl_ms' => $ttlMs, 'lease' => $lease, 'owner' => $this->owner];
            try {
                [$status, $body] = $this->call($name, 'acquire', $req);
            } catch (PicketHttpException $e) {
                $this->giveBack($key, $name, $got);
                throw new RuntimeException(sprintf('Failed to acquire the "%s" semaphore: %s', $key, $e->getMessage()), 0, $e);
            }
            if ($status === 200) {
                $got[] = self::grant($key, $lease, $body);
                continue;
            }
            $this->giveBack($key, $name, $got);
            $err = Transport::error($status, $body);
            if ($status === 409 && $err->errorCode === 'semaphore_full') {
                throw new SemaphoreAcquiringException($key, sprintf('it is full (%d permit(s) asked, %d granted and given back; %s)',
                    $key->getWeight(), count($got), $err->getMessage()));
            }
            throw new RuntimeException(sprintf('Failed to acquire the "%s" semaphore: %s', $key, $err->getMessage()), 0, $err);
        }
        $key->setState(self::GRANTS, ['until' => $t0 + $ttlMs / 1000, 'permits' => $got]);
    }

    public function putOffExpiration(Key $key, float $ttlInSecond)
    {
        $ttlMs = self::ttlMs($ttlInSecond, __METHOD__);
        if (!$key->hasState(self::GRANTS)) {
            throw new SemaphoreExpiredException($key, 'it holds no permit (never saved, released or lost)');
        }
        $t0 = microtime(true);
        if (!$this->renewAll($key, $ttlMs, 'extend')) {
            throw new SemaphoreExpiredException($key, 'a permit of it was lost: its lease expired or was released');
        }
        $state = $key->getState(self::GRANTS);
        $state['until'] = $t0 + $ttlMs / 1000;
        $key->setState(self::GRANTS, $state);
    }

    public function delete(Key $key)
    {
        if (!$key->hasState(self::GRANTS)) {
            return;
        }
        $name = self::semaphoreName((string) $key);
        $left = [];
        $why = '';
        foreach ($key->getState(self::GRANTS)['permits'] as $p) {
            try {
                [$status, $body] = $this->call($name, 'release', ['lease' => $p['lease']]);
            } catch (PicketHttpException $e) {
                [$left[], $why] = [$p, $e->getMessage()];
                continue;
            }
            if ($status !== 200 && !($status === 409 && Transport::code($body) === 'lease_lost')) {
                [$left[], $why] = [$p, Transport::error($status, $body)->getMessage()];
            }
        }
        if ($left) {
            // What is still held stays in the Key, for a retried delete().
            $state = $key->getState(self::GRANTS);
            $state['permits'] = $left;
            $key->setState(self::GRANTS, $state);
            throw new SemaphoreReleasingException($key, sprintf('%d permit(s) not released: %s', count($left), $why));
        }
        $key->removeState(self::GRANTS);
    }

    /**
     * True while every permit of the Key is held by its lease.
     *
     * As PicketStore::exists(): GET /v1/semaphores/{name} shows slots and
     * fences but never a lease, and a fence is no proof that the grant is
     * ours (fences can repeat after a lost counter under --fence-floor
     * none). The one call that checks a lease without taking a permit is
     * renew, so each permit is renewed to what is left of the Key's own
     * TTL (rounded down, and within the Key's lifetime when it has one):
     * exists() never extends a permit past what the Key already believes.
     */
    public function exists(Key $key): bool
    {
        if (!$key->hasState(self::GRANTS)) {
            return false;
        }
        $left = $key->getState(self::GRANTS)['until'] - microtime(true);
        $life = $key->getRemainingLifetime();
        if ($life !== null) {
            $left = min($left, $life);
        }
        $ms = (int) floor($left * 1000);

        return $ms >= 1 && $this->renewAll($key, $ms, 'check');
    }

    /**
     * Renews every permit of the Key to $ttlMs. False (and the other permits
     * released, the Key's grants dropped) when one was lost.
     */
    private function renewAll(Key $key, int $ttlMs, string $what): bool
    {
        $name = self::semaphoreName((string) $key);
        $state = $key->getState(self::GRANTS);
        foreach ($state['permits'] as $i => $p) {
            try {
                [$status, $body] = $this->call($name, 'renew', ['lease' => $p['lease'], 'ttl_ms' => $ttlMs]);
            } catch (PicketHttpException $e) {
                throw new RuntimeException(sprintf('Failed to %s the "%s" semaphore: %s', $what, $key, $e->getMessage()), 0, $e);
            }
            if ($status === 200) {
                $state['permits'][$i] = self::grant($key, $p['lease'], $body, $p['token']);
                continue;
            }
            if ($status === 409 && Transport::code($body) === 'lease_lost') {
                // W permits are held all or none: give back the others.
                $rest = $state['permits'];
                unset($rest[$i]);
                $this->giveBack($key, $name, $rest);

                return false;
            }
            $err = Transport::error($status, $body);
            throw new RuntimeException(sprintf('Failed to %s the "%s" semaphore: %s', $what, $key, $err->getMessage()), 0, $err);
        }
        $key->setState(self::GRANTS, $state);

        return true;
    }

    /** Best-effort release of $permits, then the Key holds none (a failure is not thrown: it would hide the first). */
    private function giveBack(Key $key, string $name, array $permits): void
    {
        foreach ($permits as $p) {
            try {
                $this->call($name, 'release', ['lease' => $p['lease']]);
            } catch (PicketHttpException) {
                // the permit's TTL frees it
            }
        }
        $key->removeState(self::GRANTS);
    }

    /** The Key's lease ids, one per unit of weight, chosen once. @return list<string> */
    private function leases(Key $key): array
    {
        if (!$key->hasState(self::LEASES)) {
            $ids = [];
            for ($i = 0; $i < $key->getWeight(); $i++) {
                $ids[] = bin2hex(random_bytes(16));
            }
            $key->setState(self::LEASES, $ids);
        }

        return $key->getState(self::LEASES);
    }

    /** @return array{lease: string, permit: int, fence: int, lock: string, token: ?string} */
    private static function grant(Key $key, string $lease, array $body, ?string $token = null): array
    {
        if (!is_int($body['fence'] ?? null) || !is_int($body['permit'] ?? null) || !is_string($body['fence_lock'] ?? null)) {
            throw new RuntimeException(sprintf('picketd replied without a permit and fence for "%s".', $key));
        }

        return ['lease' => $lease, 'permit' => $body['permit'], 'fence' => $body['fence'], 'lock' => $body['fence_lock'],
            'token' => is_string($body['fence_token'] ?? null) ? $body['fence_token'] : $token];
    }

    private static function ttlMs(float $ttl, string $method): int
    {
        if (!($ttl > 0)) {
            throw new InvalidArgumentException(sprintf('"%s()" expects a strictly positive TTL. Got %s.', $method, $ttl));
        }

        return max(1, (int) ceil($ttl * 1000));
    }

    /** POST /v1/semaphores/{name}/{verb}. */
    private function call(string $name, string $verb, array $body): array
    {
        return $this->http->call('POST', '/v1/semaphores/' . rawurlencode($name) . '/' . $verb, $body);
    }
}
