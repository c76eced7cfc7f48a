<?php

declare(strict_types=1);

namespace Picket\Lock;

use Picket\Lock\Exception\PicketHttpException;

/**
 * @internal The HTTP side of the picket stores (PicketStore for symfony/lock,
 * Picket\Semaphore\PicketSemaphoreStore for symfony/semaphore): their
 * connection options, one keep-alive curl handle, JSON in and out, and
 * picketd's error bodies as PicketHttpException. It knows no lock or
 * semaphore semantics: each store maps statuses to its component's
 * exceptions.
 */
final class Transport
{
    private string $url;
    private float $timeout;
    private float $connectTimeout;
    private ?string $token;
    private ?string $cacert;
    private int $retries;
    /** @var \CurlHandle|null one handle for every call, so the connection is kept alive */
    private $curl = null;

    /**
     * @param string $url     picketd's base URL, e.g. http://127.0.0.1:7070
     * @param array  $options timeout, connect_timeout, token, cacert, retries
     *                        (see PicketStore); other keys are the store's
     * @param string $who     the store's name, for messages
     * @param class-string<\InvalidArgumentException> $invalid what a bad URL or option throws
     */
    public function __construct(string $url, array $options, string $who, string $invalid)
    {
        if (!preg_match('#^https?://[^/]+#', $url)) {
            throw new $invalid(sprintf('%s: "%s" is not an http:// or https:// URL.', $who, $url));
        }
        $this->url = rtrim($url, '/');
        $this->timeout = (float) ($options['timeout'] ?? 10.0);
        $this->connectTimeout = (float) ($options['connect_timeout'] ?? 5.0);
        if ($this->timeout <= 0 || $this->connectTimeout <= 0) {
            throw new $invalid(sprintf('%s: timeout and connect_timeout must be positive.', $who));
        }
        $env = getenv('PICKET_TOKEN');
        $token = $options['token'] ?? (is_string($env) && $env !== '' ? $env : null);
        $this->token = $token === null ? null : trim((string) $token);
        if ($this->token !== null && !preg_match('/^[\x21-\x7e]+$/', $this->token)) {
            throw new $invalid(sprintf('%s: the token must be printable ASCII without spaces.', $who));
        }
        $this->cacert = $options['cacert'] ?? null;
        $this->retries = max(0, (int) ($options['retries'] ?? 1));
    }

    public function __destruct()
    {
        if ($this->curl !== null) {
            curl_close($this->curl);
        }
    }

    /** The owner option, default "php@HOST pid PID", cut to 128 bytes. */
    public static function owner(array $options): string
    {
        $owner = $options['owner'] ?? sprintf('php@%s pid %d', gethostname() ?: 'localhost', getmypid());

        return mb_strcut((string) $owner, 0, 128);
    }

    /**
     * One call: METHOD {url}{path} with a JSON body. Every call of the stores
     * is idempotent (the lease is theirs), so one that got no reply is
     * retried up to $retries times.
     *
     * @param string $path e.g. /v1/locks/NAME/acquire, NAME percent-encoded
     * @return array{0: int, 1: array} status and decoded JSON body
     * @throws PicketHttpException when no usable reply came
     */
    public function call(string $method, string $path, ?array $body, int $waitMs = 0): array
    {
        for ($attempt = 0; ; $attempt++) {
            try {
                return $this->http($method, $this->url . $path, $body, $waitMs);
            } catch (PicketHttpException $e) {
                if ($e->status !== 0 || $attempt >= $this->retries) {
                    throw $e;
                }
            }
        }
    }

    /**
     * A Server-Sent Events stream (GET {url}{path}, e.g. an election's
     * observe) on a curl handle of its own, driven by curl_multi: yields
     * each event as [type, data] (type "message" when it names none;
     * heartbeats too: the caller filters). It returns when picketd ends
     * the stream. An error status is thrown as Transport::error() of its
     * body; no byte for $idle seconds (picketd sends a heartbeat after
     * --events-heartbeat-ms of quiet, 15 s by default) or a broken
     * connection is a PicketHttpException with status 0, code
     * "transport". Leaving the foreach (or dropping the generator) closes
     * the connection.
     *
     * @return \Generator<int, array{0: string, 1: string}>
     * @throws PicketHttpException
     */
    public function stream(string $path, float $idle = 60.0): \Generator
    {
        $url = $this->url . $path;
        $buf = '';
        $last = hrtime(true);
        $c = curl_init();
        $m = curl_multi_init();
        $opts = $this->baseOptions($url, 0, 'text/event-stream');
        $opts[CURLOPT_HTTPGET] = true;
        $opts[CURLOPT_WRITEFUNCTION] = static function ($ch, string $data) use (&$buf, &$last): int {
            $buf .= $data;
            $last = hrtime(true);

            return strlen($data);
        };
        curl_setopt_array($c, $opts);
        curl_multi_add_handle($m, $c);
        try {
            while (true) {
                do {
                    $rc = curl_multi_exec($m, $running);
                } while ($rc === CURLM_CALL_MULTI_PERFORM);
                if ($rc !== CURLM_OK) {
                    throw new PicketHttpException(sprintf('GET %s: %s', $url, curl_multi_strerror($rc)), 0, 'transport');
                }
                $status = (int) curl_getinfo($c, CURLINFO_RESPONSE_CODE);
                if ($status === 200) {
                    $buf = str_replace("\r\n", "\n", $buf);
                    while (($ev = self::sseEvent($buf)) !== null) {
                        yield $ev;
                    }
                }
                if (!$running) {
                    $info = curl_multi_info_read($m);
                    $err = is_array($info) ? $info['result'] : CURLE_OK;
                    if ($err !== CURLE_OK) {
                        throw new PicketHttpException(sprintf('GET %s: %s', $url, curl_strerror($err)), 0, 'transport',
                            null, null, $err);
                    }
                    if ($status === 200) {
                        return; // picketd ended the stream (shutting down)
                    }
                    try {
                        $json = json_decode($buf, true, 16, JSON_THROW_ON_ERROR);
                    } catch (\JsonException) {
                        $json = null;
                    }
                    throw self::error($status, is_array($json) ? $json : []);
                }
                $quiet = (hrtime(true) - $last) / 1e9;
                if ($quiet >= $idle) {
                    throw new PicketHttpException(sprintf('GET %s: nothing for %.1f s (not even a heartbeat)', $url, $quiet),
                        0, 'transport');
                }
                if (curl_multi_select($m, min(1.0, $idle - $quiet)) === -1) {
                    usleep(10000);
                }
            }
        } finally {
            curl_multi_remove_handle($m, $c);
            curl_close($c);
            curl_multi_close($m);
        }
    }

    /**
     * Takes the first complete event (a block ended by an empty line) off
     * $buf: [type, data], the data lines joined by "\n". Comments and
     * blocks without data are skipped; null when no complete event is left.
     *
     * @internal public for the tests
     * @return array{0: string, 1: string}|null
     */
    public static function sseEvent(string &$buf): ?array
    {
        while (($end = strpos($buf, "\n\n")) !== false) {
            $block = substr($buf, 0, $end);
            $buf = (string) substr($buf, $end + 2);
            $type = 'message';
            $data = null;
            foreach (explode("\n", $block) as $line) {
                if ($line === '' || $line[0] === ':') {
                    continue;
                }
                [$field, $value] = array_pad(explode(':', $line, 2), 2, '');
                if ($value !== '' && $value[0] === ' ') {
                    $value = substr($value, 1);
                }
                if ($field === 'event') {
                    $type = $value;
                } elseif ($field === 'data') {
                    $data = $data === null ? $value : $data . "\n" . $value;
                }
            }
            if ($data !== null) {
                return [$type, $data];
            }
        }

        return null;
    }

    /** picketd's error code in a reply body, or null. */
    public static function code(array $body): ?string
    {
        $c = $body['error']['code'] ?? null;

        return is_string($c) ? $c : null;
    }

    /** A reply that is not a success, as the exception to chain. */
    public static function error(int $status, array $body): PicketHttpException
    {
        $e = $body['error'] ?? [];
        $code = is_string($e['code'] ?? null) ? $e['code'] : 'http_' . $status;
        $msg = is_string($e['message'] ?? null) ? $e['message'] : 'HTTP ' . $status;

        return new PicketHttpException(sprintf('%d %s: %s', $status, $code, $msg), $status, $code,
            is_int($e['retry_after_ms'] ?? null) ? $e['retry_after_ms'] : null,
            is_string($e['owner'] ?? null) ? $e['owner'] : null);
    }

    /**
     * The curl options every request shares: URL, timeouts (none when
     * $timeoutMs is 0: a stream), TLS and the headers (Expect: empty,
     * Accept, the bearer token, then $extra).
     */
    private function baseOptions(string $url, int $timeoutMs, string $accept, array $extra = []): array
    {
        $headers = ['Expect:', 'Accept: ' . $accept];
        if ($this->token !== null) {
            $headers[] = 'Authorization: Bearer ' . $this->token;
        }
        $opts = [
            CURLOPT_URL => $url,
            CURLOPT_CONNECTTIMEOUT_MS => (int) ceil($this->connectTimeout * 1000),
            CURLOPT_NOSIGNAL => true,
            CURLOPT_FOLLOWLOCATION => false,
            CURLOPT_PROTOCOLS => CURLPROTO_HTTP | CURLPROTO_HTTPS,
            CURLOPT_HTTPHEADER => array_merge($headers, $extra),
        ];
        if ($timeoutMs > 0) {
            $opts[CURLOPT_TIMEOUT_MS] = $timeoutMs;
        }
        if ($this->cacert !== null) {
            $opts[CURLOPT_CAINFO] = $this->cacert;
        }

        return $opts;
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
        $headers = [];
        $opts = [CURLOPT_RETURNTRANSFER => true];
        if ($method === 'GET') {
            $opts[CURLOPT_HTTPGET] = true;
        } else {
            $opts[CURLOPT_CUSTOMREQUEST] = $method;
            $opts[CURLOPT_POSTFIELDS] = json_encode($body ?? new \stdClass(), JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES);
            $headers[] = 'Content-Type: application/json';
        }
        $opts += $this->baseOptions($url, (int) ceil($this->timeout * 1000) + $waitMs, 'application/json', $headers);
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
