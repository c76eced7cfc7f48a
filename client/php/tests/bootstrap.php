<?php

declare(strict_types=1);

require __DIR__ . '/../autoload.php';

/** picketd's URL from the runner; a test without it fails (it never skips). */
function picket_url(string $var = 'PICKET_URL'): string
{
    $u = getenv($var);
    if (!is_string($u) || $u === '') {
        throw new RuntimeException("$var is not set: run tests/integration/test_php.sh");
    }

    return $u;
}

/**
 * One request to picketd (PICKET_URL) by plain curl, as an operator or
 * another process makes it: METHOD PATH with an optional JSON body.
 *
 * @return array{0: int, 1: mixed} status and decoded body
 */
function picket_request(string $method, string $path, ?array $body = null): array
{
    $c = curl_init(picket_url() . $path);
    curl_setopt_array($c, [CURLOPT_RETURNTRANSFER => true, CURLOPT_CUSTOMREQUEST => $method]);
    if ($body !== null) {
        curl_setopt_array($c, [CURLOPT_POSTFIELDS => json_encode($body), CURLOPT_HTTPHEADER => ['Content-Type: application/json']]);
    }
    $raw = curl_exec($c);

    return [curl_getinfo($c, CURLINFO_RESPONSE_CODE), json_decode((string) $raw, true)];
}

/** A resource name no other test uses. */
function picket_resource(string $what): string
{
    return 'php-test.' . $what . '.' . bin2hex(random_bytes(4));
}

/**
 * Starts tests/holder.php, which takes RESOURCE through its own PicketStore,
 * prints "held FENCE", holds it HOLD_MS and releases it. Returns the process
 * and its stdout once it holds the lock.
 *
 * @return array{0: resource, 1: resource, 2: int}
 */
function picket_holder(string $resource, int $holdMs): array
{
    $cmd = [PHP_BINARY, __DIR__ . '/holder.php', picket_url(), $resource, (string) $holdMs];
    $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => STDERR], $pipes);
    if (!is_resource($p)) {
        throw new RuntimeException('could not start holder.php');
    }
    $line = fgets($pipes[1]);
    if (!is_string($line) || !preg_match('/^held (\d+)$/', trim($line), $m)) {
        throw new RuntimeException('holder.php did not take the lock: ' . var_export($line, true));
    }

    return [$p, $pipes[1], (int) $m[1]];
}
