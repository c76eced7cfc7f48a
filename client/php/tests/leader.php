<?php
// leader.php URL ELECTION HOLD_MS: a second process that leads an election,
// for the hand-over test (PHP waits on one thread, so the leader must be
// apart): prints "leads TERM", holds HOLD_MS, prints "resigning MICROTIME
// candidates=N" (wall clock, as the waiting test reads it; N: the
// candidates waiting in picketd) and resigns.
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use Picket\Election\Election;

[, $url, $name, $holdMs] = $argv;
$elections = new Election($url, ['owner' => 'leader.php']);
$lead = $elections->campaign($name, ['ttl_ms' => 30000]);
echo 'leads ', $lead->term, "\n";
usleep((int) $holdMs * 1000);
$candidates = $elections->leader($name)['candidates'];
printf("resigning %.6f candidates=%d\n", microtime(true), $candidates);
$lead->resign();
echo "resigned\n";
