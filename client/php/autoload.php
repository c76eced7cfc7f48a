<?php
// Use without Composer: loads Debian's symfony/lock (php-symfony-lock) when
// it is installed, then maps Picket\Lock\* to src/ (PSR-4). With Composer,
// use vendor/autoload.php instead.
declare(strict_types=1);

$debianLock = '/usr/share/php/Symfony/Component/Lock/autoload.php';
if (!interface_exists('Symfony\Component\Lock\PersistingStoreInterface') && is_file($debianLock)) {
    require_once $debianLock;
}

spl_autoload_register(static function (string $class): void {
    $prefix = 'Picket\\Lock\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
