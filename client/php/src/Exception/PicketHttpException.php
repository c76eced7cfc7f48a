<?php

declare(strict_types=1);

namespace Picket\Lock\Exception;

/**
 * What picketd (or the transport) said, attached as the previous exception
 * of the symfony/lock exception that PicketStore throws.
 *
 * $status is the HTTP status (0: no reply: a transport error, see $curlErrno);
 * $errorCode is picketd's error code ("lock_held", "lease_lost",
 * "store_unavailable", "unauthenticated", ...), or "transport" / "bad_reply".
 */
final class PicketHttpException extends \RuntimeException
{
    public function __construct(
        string $message,
        public readonly int $status,
        public readonly string $errorCode,
        public readonly ?int $retryAfterMs = null,
        public readonly ?string $owner = null,
        public readonly int $curlErrno = 0,
    ) {
        parent::__construct($message, $status);
    }
}
