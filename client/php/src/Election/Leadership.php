<?php

declare(strict_types=1);

namespace Picket\Election;

use Picket\Lock\Exception\LeaseLostException;
use Picket\Lock\Exception\PicketHttpException;
use Picket\Lock\Transport;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;

/**
 * A won campaign (Election::campaign()). $name: the election; $lease: the
 * leadership's secret (renew, proclaim, resign); $term: the fence of every
 * write, strictly increasing per election; $owner. value(), ttlMs() and
 * fenceToken() (the signed term, null unless picketd signs fences) follow
 * the renewals and proclaims; deadline() is the moment, on hrtime()'s
 * clock, at which this process must assume the leadership gone: request
 * sent + TTL - a drift margin (1% + 2 ms), moved by each renewal.
 *
 * The loss signal, without threads: call ensureLeader() before each unit
 * of work. It renews when a third of the TTL has passed since the last
 * renewal, and throws LeaseLostException once the leadership is lost
 * (picketd answered lease_lost: broken, expired, resigned) or its local
 * deadline passed (renewals failed for too long, or the process was
 * paused); it returns the seconds left. isLeader() is the same as a bool.
 * A leadership still held when the object is destroyed is resigned.
 */
final class Leadership
{
    public readonly string $name;
    public readonly string $lease;
    public readonly int $term;
    public readonly ?string $owner;

    private ?string $value;
    private int $ttlMs;
    private ?string $fenceToken;
    /** hrtime(true) (ns) past which the leadership is assumed gone */
    private int $deadline;
    /** hrtime(true) (ns) at which the last successful renewal (or the campaign) was sent */
    private int $renewedAt;
    private bool $lost = false;
    private bool $resigned = false;
    private ?\Exception $lastError = null;

    /** @internal Election::campaign() makes it, from picketd's reply sent at hrtime $sent. */
    public function __construct(private readonly Transport $http, array $doc, int $sent)
    {
        if (!is_int($doc['term'] ?? null) || !is_int($doc['ttl_ms'] ?? null) || !is_string($doc['lease'] ?? null)) {
            throw new LockStorageException('picketd replied to a campaign without a term, ttl_ms or lease.');
        }
        $this->name = (string) ($doc['election'] ?? '');
        $this->lease = $doc['lease'];
        $this->term = $doc['term'];
        $this->owner = is_string($doc['owner'] ?? null) ? $doc['owner'] : null;
        $this->value = is_string($doc['value'] ?? null) ? $doc['value'] : null;
        $this->ttlMs = $doc['ttl_ms'];
        $this->fenceToken = self::token($doc);
        $this->renewedAt = $sent;
        $this->deadline = $sent + self::lifetimeNs($this->ttlMs);
    }

    public function __destruct()
    {
        if (!$this->resigned && !$this->lost && hrtime(true) < $this->deadline) {
            $this->resignQuietly();
        }
    }

    /** The value last published (campaign or proclaim); null: none. */
    public function value(): ?string
    {
        return $this->value;
    }

    /** The TTL of the last grant or renewal, ms. */
    public function ttlMs(): int
    {
        return $this->ttlMs;
    }

    /** The signed term (Picket-Fence-Token) when picketd signs fences (--fence-key-file), else null. */
    public function fenceToken(): ?string
    {
        return $this->fenceToken;
    }

    /** The local deadline, in seconds on hrtime()'s clock (hrtime(true) / 1e9). */
    public function deadline(): float
    {
        return $this->deadline / 1e9;
    }

    /** Seconds left before the local deadline (0 when past it, lost or resigned). */
    public function remaining(): float
    {
        if ($this->lost || $this->resigned) {
            return 0.0;
        }

        return max(0.0, ($this->deadline - hrtime(true)) / 1e9);
    }

    /** The last renewal error ensureLeader() kept (not lease_lost: that throws), or null. */
    public function lastError(): ?\Exception
    {
        return $this->lastError;
    }

    /**
     * The headers a fenced store (examples/fenced-kv) checks on a write, as
     * curl's CURLOPT_HTTPHEADER lines: Picket-Lock (the election's name),
     * Picket-Fence (the term) and, when signed, Picket-Fence-Token.
     *
     * @return list<string>
     */
    public function fenceHeaders(): array
    {
        $h = ['Picket-Lock: ' . $this->name, 'Picket-Fence: ' . $this->term];
        if ($this->fenceToken !== null) {
            $h[] = 'Picket-Fence-Token: ' . $this->fenceToken;
        }

        return $h;
    }

    /**
     * Call before each unit of work: renews when a third of the TTL has
     * passed since the last renewal, and returns the seconds left before
     * the local deadline. Throws LeaseLostException once the leadership is
     * lost (picketd said lease_lost), resigned, or past its deadline. A
     * renewal that failed otherwise (no reply, 503) is kept in lastError()
     * and tried again at the next call, until the deadline.
     *
     * @throws LeaseLostException
     */
    public function ensureLeader(): float
    {
        if ($this->resigned) {
            throw new LeaseLostException(sprintf('%s was resigned.', $this->describe()));
        }
        $this->checkDeadline();
        if ((hrtime(true) - $this->renewedAt) * 3 >= $this->ttlMs * 1000000) {
            try {
                $this->renew();
                $this->lastError = null;
            } catch (LockStorageException $e) {
                $this->lastError = $e;
                $this->checkDeadline($e);
            }
        }

        return $this->remaining();
    }

    /** ensureLeader() as a bool: false once lost, resigned or past the deadline. Never throws. */
    public function isLeader(): bool
    {
        try {
            $this->ensureLeader();

            return true;
        } catch (LeaseLostException) {
            return false;
        }
    }

    /**
     * Extends the leadership to $ttlMs from now (default: its TTL) and moves
     * the deadline. LeaseLostException when it no longer leads (or is past
     * its deadline: never sent then); LockStorageException for any other
     * failure.
     */
    public function renew(?int $ttlMs = null): self
    {
        $this->post('renew', ['lease' => $this->lease, 'ttl_ms' => Election::ms($ttlMs ?? $this->ttlMs, 'ttl_ms', 1)]);

        return $this;
    }

    /**
     * Publishes a new value (null: none) without a new term: observers get
     * a leader event with the same term. Renews too, to $ttlMs (default:
     * the lease's TTL, picketd's own). Throws as renew() does.
     */
    public function proclaim(?string $value, ?int $ttlMs = null): self
    {
        $body = ['lease' => $this->lease, 'value' => Election::checkValue($value)];
        if ($ttlMs !== null) {
            $body['ttl_ms'] = Election::ms($ttlMs, 'ttl_ms', 1);
        }
        $doc = $this->post('proclaim', $body);
        $this->value = array_key_exists('value', $doc) ? (is_string($doc['value']) ? $doc['value'] : null)
            : ($value === '' ? null : $value);

        return $this;
    }

    /**
     * Steps down: the next waiting candidate leads within milliseconds.
     * True when resigned, false when the leadership had already ended
     * (lease_lost, or resigned before). From here on this process is no
     * leader, whatever the outcome; a failed call (no reply) throws
     * LockReleasingException and may be retried.
     */
    public function resign(): bool
    {
        if ($this->resigned) {
            return false;
        }
        $this->resigned = true;
        $this->deadline = min($this->deadline, hrtime(true));
        try {
            [$status, $doc] = $this->http->call('POST', Election::path($this->name, 'resign'), ['lease' => $this->lease]);
        } catch (PicketHttpException $e) {
            $this->resigned = false;
            throw new LockReleasingException(sprintf('Failed to resign %s: %s', $this->describe(), $e->getMessage()), 0, $e);
        }
        if ($status === 200) {
            return true;
        }
        if ($status === 409 && Transport::code($doc) === 'lease_lost') {
            $this->lost = true;

            return false;
        }
        $this->resigned = false;
        throw new LockReleasingException(sprintf('Failed to resign %s.', $this->describe()), 0, Transport::error($status, $doc));
    }

    /** @internal resign(), errors swallowed (the lease ends at its TTL then). */
    public function resignQuietly(): void
    {
        try {
            $this->resign();
        } catch (\Exception) {
            $this->resigned = true;
        }
    }

    private function describe(): string
    {
        return sprintf('the leadership of "%s" (term %d)', $this->name, $this->term);
    }

    /** Throws LeaseLostException (and marks the leadership lost) when lost or past the deadline. */
    private function checkDeadline(?\Exception $previous = null): void
    {
        if ($this->lost) {
            throw new LeaseLostException(sprintf('%s was lost.', $this->describe()), 0, $previous);
        }
        if (hrtime(true) >= $this->deadline) {
            $this->lost = true;
            throw new LeaseLostException(sprintf('%s is past its local deadline.', $this->describe()), 0, $previous);
        }
    }

    /** POST renew or proclaim; keeps the new TTL, deadline and token. */
    private function post(string $verb, array $body): array
    {
        if ($this->resigned) {
            throw new LeaseLostException(sprintf('%s was resigned.', $this->describe()));
        }
        $this->checkDeadline();
        $sent = hrtime(true);
        try {
            [$status, $doc] = $this->http->call('POST', Election::path($this->name, $verb), $body);
        } catch (PicketHttpException $e) {
            throw new LockStorageException(sprintf('Failed to %s %s: %s', $verb, $this->describe(), $e->getMessage()), 0, $e);
        }
        if ($status === 409 && Transport::code($doc) === 'lease_lost') {
            $this->lost = true;
            throw new LeaseLostException(sprintf('%s was lost: picketd says lease_lost.', $this->describe()), 0,
                Transport::error($status, $doc));
        }
        if ($status !== 200 || !is_int($doc['ttl_ms'] ?? null)) {
            throw new LockStorageException(sprintf('Failed to %s %s.', $verb, $this->describe()), 0, Transport::error($status, $doc));
        }
        $this->ttlMs = $doc['ttl_ms'];
        // picketd's expiry is now + ttl_ms, also when that is sooner than
        // before (a renewal or proclaim with a shorter TTL): the deadline follows.
        $this->deadline = $sent + self::lifetimeNs($this->ttlMs);
        $this->renewedAt = $sent;
        $this->fenceToken = self::token($doc) ?? $this->fenceToken;

        return $doc;
    }

    /** What a TTL gives locally, ns: the TTL less the drift margin (1% + 2 ms), as libpicket keeps back. */
    private static function lifetimeNs(int $ttlMs): int
    {
        return (int) (($ttlMs - $ttlMs * 0.01 - 2) * 1000000);
    }

    /** The signed term of a reply: fence_token (as a lock's grant names it), or token. */
    private static function token(array $doc): ?string
    {
        $t = $doc['fence_token'] ?? $doc['token'] ?? null;

        return is_string($t) ? $t : null;
    }
}
