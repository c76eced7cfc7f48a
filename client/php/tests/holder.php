<?php
// holder.php URL RESOURCE HOLD_MS: a second process that holds a lock, for
// the blocking tests (PHP waits on one thread, so the holder must be apart).
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use Picket\Lock\PicketStore;
use Symfony\Component\Lock\Key;

[, $url, $resource, $holdMs] = $argv;
$store = new PicketStore($url, ['owner' => 'holder.php']);
$key = new Key($resource);
$store->save($key);
echo 'held ', $store->fence($key), "\n";
usleep((int) $holdMs * 1000);
$store->delete($key);
echo "released\n";
