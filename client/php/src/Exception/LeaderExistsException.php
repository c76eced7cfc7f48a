<?php

declare(strict_types=1);

namespace Picket\Lock\Exception;

use Symfony\Component\Lock\Exception\LockConflictedException;

/**
 * A campaign found a leader (409 leader_exists), and did not wait or its
 * wait ran out: Picket\Election\Election::campaign(). A
 * LockConflictedException, as a held lock's 409 lock_held is; the
 * previous exception is the PicketHttpException with retryAfterMs (the
 * leader's remaining lease) and owner (the leader's).
 */
final class LeaderExistsException extends LockConflictedException
{
    public function retryAfterMs(): ?int
    {
        $p = $this->getPrevious();

        return $p instanceof PicketHttpException ? $p->retryAfterMs : null;
    }

    /** The leader's owner label, when picketd told it. */
    public function owner(): ?string
    {
        $p = $this->getPrevious();

        return $p instanceof PicketHttpException ? $p->owner : null;
    }
}
