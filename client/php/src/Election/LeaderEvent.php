<?php

declare(strict_types=1);

namespace Picket\Election;

/**
 * One "leader" event of an election's stream (Election::observe()):
 * $election, the name; $leader, null when nobody leads (resigned, expired,
 * broken), else ['term' => int, 'value' => ?string, 'owner' => ?string,
 * 'since' => unix ms of the grant, 'ttl_ms' => int]; $term, the last term
 * issued; $time, unix ms; $data, the whole JSON object. An event with the
 * previous one's leader term and another value is a proclaim.
 */
final class LeaderEvent
{
    public readonly string $election;
    public readonly ?array $leader;
    public readonly int $term;
    public readonly ?int $time;

    public function __construct(public readonly array $data)
    {
        $this->election = (string) ($data['election'] ?? '');
        $this->leader = is_array($data['leader'] ?? null) ? $data['leader'] : null;
        $this->term = (int) ($data['term'] ?? 0);
        $this->time = is_int($data['time'] ?? null) ? $data['time'] : null;
    }

    /** The leader's term, or null when nobody leads. */
    public function leaderTerm(): ?int
    {
        return $this->leader === null ? null : (int) $this->leader['term'];
    }

    /** The leader's value (null when nobody leads, or it has none). */
    public function value(): ?string
    {
        return $this->leader['value'] ?? null;
    }

    /** The leader's owner label (null when nobody leads, or it has none). */
    public function owner(): ?string
    {
        return $this->leader['owner'] ?? null;
    }
}
