<?php
// examples/php/fenced-kv.php: the one fenced-kv call the PHP examples make
// (examples/fenced-kv), shared by inventory-sync.php and leader-scheduler.php.
declare(strict_types=1);

/** One fenced-kv call: [status, decoded body]. */
function kv(string $method, string $url, array $headers = [], ?string $body = null): array
{
    $c = curl_init($url);
    curl_setopt_array($c, [CURLOPT_CUSTOMREQUEST => $method, CURLOPT_RETURNTRANSFER => true,
        CURLOPT_TIMEOUT_MS => 10000, CURLOPT_HTTPHEADER => array_merge(['Expect:'], $headers)]);
    if ($body !== null) {
        curl_setopt($c, CURLOPT_POSTFIELDS, $body);
    }
    $raw = curl_exec($c);
    if ($raw === false) {
        throw new RuntimeException("$method $url: " . curl_error($c));
    }

    return [curl_getinfo($c, CURLINFO_RESPONSE_CODE), json_decode((string) $raw, true)];
}
