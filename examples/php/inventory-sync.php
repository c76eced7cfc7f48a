<?php
// examples/php/inventory-sync.php: the inventory sync of
// shared/background/redis-lock-article.txt on symfony/lock, with picketd as
// the store (Picket\Lock\PicketStore) and fenced-kv as the storage.
//
//   php inventory-sync.php --picket URL --kv URL [--workers N] [--rounds N] [--initial N]
//
// It sets the stock to --initial, starts --workers worker processes (this
// script with --worker I), each running --rounds jobs: take the lock
// (LockFactory, blocking), claim the grant's fence at fenced-kv, read the
// stock, work a little, write stock - 1 with Picket-Lock, Picket-Fence (and
// Picket-Fence-Token when picketd signs fences), release. The last line is
//   final stock=N expected=M applied=K
// Exit 0 when the stock is exact, 1 otherwise.
declare(strict_types=1);

require __DIR__ . '/../../client/php/autoload.php';
require __DIR__ . '/fenced-kv.php';

use Picket\Lock\PicketStore;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

// The resource, as a PHP team names it: a class. It is not a valid picket
// lock name, so it is held as "h." + 32 hex of its SHA-256 (PicketStore::lockName).
const RESOURCE = 'App\Jobs\InventorySync';

$o = getopt('', ['picket:', 'kv:', 'workers:', 'rounds:', 'initial:', 'worker:']);
$picket = $o['picket'] ?? getenv('PICKET_SERVER') ?: null;
$kv = $o['kv'] ?? null;
if (!is_string($picket) || !is_string($kv)) {
    fwrite(STDERR, "usage: php inventory-sync.php --picket URL --kv URL [--workers N] [--rounds N] [--initial N]\n");
    exit(2);
}
$workers = (int) ($o['workers'] ?? 3);
$rounds = (int) ($o['rounds'] ?? 4);
$initial = (int) ($o['initial'] ?? 100);
$lockName = PicketStore::lockName(RESOURCE);

if (isset($o['worker'])) {
    // --- one worker ------------------------------------------------------
    $w = (int) $o['worker'];
    $store = new PicketStore($picket, ['owner' => "inventory-sync worker $w"]);
    $factory = new LockFactory($store);
    for ($job = 1; $job <= $rounds; $job++) {
        $key = new Key(RESOURCE);
        $lock = $factory->createLockFromKey($key, 10.0);
        $lock->acquire(true);
        // What the storage needs to refuse a holder that lost the lock.
        $fence = [
            'Picket-Lock: ' . $store->lock($key),
            'Picket-Fence: ' . $store->fence($key),
        ];
        if (($token = $store->fenceToken($key)) !== null) {
            $fence[] = 'Picket-Fence-Token: ' . $token;
        }
        // Claim first: from here on no older holder can write.
        [$st] = kv('POST', "$kv/fence/" . rawurlencode($store->lock($key)) . '/claim', array_slice($fence, 1));
        if ($st !== 200) {
            echo "worker $w job $job: claim refused (HTTP $st)\n";
            $lock->release();
            continue;
        }
        [$st, $cur] = kv('GET', "$kv/kv/stock");
        if ($st !== 200) {
            throw new RuntimeException("read: HTTP $st");
        }
        usleep(random_int(10, 60) * 1000); // the sync's own work
        $new = (int) $cur['value'] - 1;
        [$st, $res] = kv('PUT', "$kv/kv/stock", $fence, (string) $new);
        printf("worker %d job %d fence %d: stock %d -> %d: %s\n", $w, $job, $store->fence($key),
            $cur['value'], $new, $st === 200 ? 'applied' : "REJECTED HTTP $st " . ($res['error']['code'] ?? ''));
        $lock->release();
    }
    exit(0);
}

// --- the run -------------------------------------------------------------
// Fence 1 is below every grant's fence: the first holder's claim shuts it out.
[$st] = kv('PUT', "$kv/kv/stock", ["Picket-Lock: $lockName", 'Picket-Fence: 1'], (string) $initial);
if ($st !== 200) {
    fwrite(STDERR, "inventory-sync: could not set the initial stock (HTTP $st)\n");
    exit(1);
}
echo "inventory-sync: resource ", RESOURCE, " is picket lock $lockName; $workers workers x $rounds jobs, stock $initial\n";
$procs = [];
for ($w = 1; $w <= $workers; $w++) {
    $cmd = [PHP_BINARY, __FILE__, '--picket', $picket, '--kv', $kv, '--rounds', (string) $rounds, '--worker', (string) $w];
    $procs[$w] = proc_open($cmd, [1 => ['pipe', 'w'], 2 => STDERR], $pipes);
    $procs[$w] = [$procs[$w], $pipes[1]];
}
$applied = 0;
$failed = 0;
foreach ($procs as [$p, $out]) {
    $text = stream_get_contents($out);
    echo $text;
    $applied += preg_match_all('/: applied$/m', $text);
    $failed += proc_close($p) !== 0 ? 1 : 0;
}
[, $cur] = kv('GET', "$kv/kv/stock");
$final = (int) $cur['value'];
$expected = $initial - $applied;
echo "final stock=$final expected=$expected applied=$applied\n";
exit($failed === 0 && $final === $expected ? 0 : 1);
