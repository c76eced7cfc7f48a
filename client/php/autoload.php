<?php
// Use without Composer: loads Debian's symfony/lock (php-symfony-lock) and
// symfony/semaphore (php-symfony-semaphore) when they are installed, then
// maps Picket\Lock\* to src/, Picket\Semaphore\* to src/Semaphore/ and
// Picket\Election\* to src/Election/ (PSR-4). With Composer, use vendor/autoload.php instead.
declare(strict_types=1);

$debianLock = '/usr/share/php/Symfony/Component/Lock/autoload.php';
if (!interface_exists('Symfony\Component\Lock\PersistingStoreInterface') && is_file($debianLock)) {
    require_once $debianLock;
}
$debianSemaphore = '/usr/share/php/Symfony/Component/Semaphore/autoload.php';
if (!interface_exists('Symfony\Component\Semaphore\PersistingStoreInterface') && is_file($debianSemaphore)) {
    require_once $debianSemaphore;
}

spl_autoload_register(static function (string $class): void {
    foreach (['Picket\\Semaphore\\' => '/src/Semaphore/', 'Picket\\Election\\' => '/src/Election/', 'Picket\\Lock\\' => '/src/'] as $prefix => $dir) {
        if (strncmp($class, $prefix, strlen($prefix)) === 0) {
            $file = __DIR__ . $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }

            return;
        }
    }
});
