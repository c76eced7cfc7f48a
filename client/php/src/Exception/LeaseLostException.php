<?php

declare(strict_types=1);

namespace Picket\Lock\Exception;

use Symfony\Component\Lock\Exception\LockConflictedException;

/**
 * A lease is gone: picketd answered 409 lease_lost (it expired, was
 * released, resigned or broken by an operator), or its local deadline
 * passed without a renewal. PicketStore::putOffExpiration() throws it for
 * a lock (a LockConflictedException, as symfony's RedisStore throws when
 * its token is gone); a Picket\Election\Leadership throws it from
 * renew(), proclaim() and ensureLeader() once it no longer leads. The
 * previous exception is the PicketHttpException of the 409, when there
 * was one.
 */
class LeaseLostException extends LockConflictedException
{
}
