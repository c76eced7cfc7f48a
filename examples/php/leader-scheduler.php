<?php
// examples/php/leader-scheduler.php: a scheduler that only the leader runs,
// with the PHP client (Picket\Election, client/php) and a fenced-kv
// (examples/fenced-kv); the PHP twin of examples/python/leader-scheduler.py.
//
//   php leader-scheduler.php --picket URL --kv URL [--candidates N] [--ticks N]
//       [--interval-ms MS] [--ttl-ms MS] [--election NAME] [--key KEY]
//
// It starts --candidates candidate processes (this script with --candidate
// I; processes on several hosts in real life), each campaigning for the
// election --election and waiting its turn. The leader runs the job
// --ticks times, every --interval-ms: the job counts its runs in fenced-kv
// at --key, each write sent with the leader's term as its fence
// (Picket-Lock: ELECTION, Picket-Fence: TERM, + Picket-Fence-Token when
// picketd signs). PHP has no thread to renew in the background: the leader
// calls ensureLeader() before each unit of work, which renews when a third
// of the TTL has passed and throws LeaseLostException once the leadership
// is lost; then it stops at once. After its ticks it resigns, and the next
// candidate leads with a higher term. At the end the first leader's write
// is replayed with its old term, as a leader paused past its TTL would send
// it: fenced-kv has seen newer terms and refuses it (409 stale_fence). The
// last line is
//   final runs=N expected=N leaders=L
// Exit 0 when the runs are exact, every candidate led once and the stale
// write was refused; 1 otherwise.
declare(strict_types=1);

require __DIR__ . '/../../client/php/autoload.php';
require __DIR__ . '/fenced-kv.php';

use Picket\Election\Election;
use Picket\Lock\Exception\LeaseLostException;

$o = getopt('', ['picket:', 'kv:', 'candidates:', 'ticks:', 'interval-ms:', 'ttl-ms:', 'election:', 'key:', 'candidate:']);
$picket = $o['picket'] ?? getenv('PICKET_SERVER') ?: null;
$kv = $o['kv'] ?? null;
if (!is_string($picket) || !is_string($kv)) {
    fwrite(STDERR, "usage: php leader-scheduler.php --picket URL --kv URL [--candidates N] [--ticks N] [--interval-ms MS] [--ttl-ms MS]\n");
    exit(2);
}
$candidates = (int) ($o['candidates'] ?? 2);
$ticks = (int) ($o['ticks'] ?? 3);
$intervalMs = (int) ($o['interval-ms'] ?? 100);
$ttlMs = (int) ($o['ttl-ms'] ?? 3000);
$election = (string) ($o['election'] ?? 'php-example.scheduler');
$key = (string) ($o['key'] ?? 'php-example-runs');

/** The job's count of runs in fenced-kv (0 before the first). */
function runs(string $kv, string $key): int
{
    [$st, $doc] = kv('GET', "$kv/kv/$key");
    if ($st === 404) {
        return 0;
    }
    if ($st !== 200) {
        throw new RuntimeException("GET /kv/$key: HTTP $st");
    }

    return (int) $doc['value'];
}

if (isset($o['candidate'])) {
    // --- one candidate ---------------------------------------------------
    $me = 'cand-' . (int) $o['candidate'];
    $lead = (new Election($picket, ['owner' => $me]))
        ->campaign($election, ['ttl_ms' => $ttlMs, 'wait_ms' => 60000, 'value' => $me]);
    echo "$me leads term {$lead->term}\n";
    try {
        for ($tick = 1; $tick <= $ticks; $tick++) {
            $lead->ensureLeader(); // before each unit of work: renews when due, throws once lost
            $n = runs($kv, $key) + 1;
            [$st, $res] = kv('PUT', "$kv/kv/$key", $lead->fenceHeaders(), (string) $n);
            echo "$me term {$lead->term} tick $tick: runs=$n ($st)\n";
            if ($st !== 200) {
                echo "$me: write refused: $st ", $res['error']['code'] ?? '', "\n";
                break;
            }
            usleep($intervalMs * 1000);
        }
    } catch (LeaseLostException $e) {
        echo "$me lost the leadership (term {$lead->term}): stopping: {$e->getMessage()}\n";
    }
    echo "$me resigns term {$lead->term}\n";
    $lead->resign();
    exit(0);
}

// --- the run -------------------------------------------------------------
$procs = [];
for ($i = 1; $i <= $candidates; $i++) {
    $cmd = [PHP_BINARY, __FILE__, '--picket', $picket, '--kv', $kv, '--candidate', (string) $i, '--ticks', (string) $ticks,
        '--interval-ms', (string) $intervalMs, '--ttl-ms', (string) $ttlMs, '--election', $election, '--key', $key];
    $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => STDERR], $pipes);
    $procs[] = [$p, $pipes[1]];
}
$terms = [];
$failed = 0;
foreach ($procs as [$p, $out]) {
    $text = (string) stream_get_contents($out);
    echo $text;
    if (preg_match('/ leads term (\d+)$/m', $text, $m)) {
        $terms[] = (int) $m[1];
    }
    $failed += proc_close($p) !== 0 ? 1 : 0;
}
// A zombie leader: the first term, long resigned, writes again.
$refused = false;
if ($terms) {
    $first = min($terms);
    [$st, $res] = kv('PUT', "$kv/kv/$key", ["Picket-Lock: $election", "Picket-Fence: $first"], '0');
    $refused = $st === 409;
    echo $refused ? "stale write refused: 409 {$res['error']['code']} (term $first)\n"
        : "stale write NOT refused: $st (term $first)\n";
}
$got = runs($kv, $key);
$want = $candidates * $ticks;
$leaders = count(array_unique($terms));
echo "final runs=$got expected=$want leaders=$leaders\n";
exit($failed === 0 && $refused && $got === $want && $leaders === $candidates ? 0 : 1);
