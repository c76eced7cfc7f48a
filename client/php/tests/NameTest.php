<?php

declare(strict_types=1);

namespace Picket\Lock\Tests;

use Picket\Lock\PicketStore;
use PHPUnit\Framework\TestCase;

/** The resource-name mapping, no server needed. */
final class NameTest extends TestCase
{
    public function testValidNamesAreUsedAsTheyAre(): void
    {
        foreach (['inventory-sync', 'billing.nightly:eu-west-1', 'a', 'A_b-9.z:', '...', str_repeat('x', 200)] as $n) {
            $this->assertSame($n, PicketStore::lockName($n));
        }
    }

    public function testOtherNamesMapToPrefixAndHash(): void
    {
        // Vector: printf %s 'App\Service\Inventory::sync' | sha256sum | cut -c1-32
        $this->assertSame('h.d4f3ecf391088ccd67753144d8dac2ca', PicketStore::lockName('App\Service\Inventory::sync'));
        foreach (['', '.', '..', str_repeat('x', 201), 'a/b', 'a b', "a\0b", 'stock{1}', 'Lager-Bestand-Größe',
                  "inventory-sync\n", 'App\Kernel'] as $n) {
            $mapped = PicketStore::lockName($n);
            $this->assertSame('h.' . substr(hash('sha256', $n), 0, 32), $mapped, var_export($n, true));
            $this->assertMatchesRegularExpression('/^h\.[0-9a-f]{32}$/D', $mapped);
            $this->assertSame($mapped, PicketStore::lockName($n), 'deterministic');
        }
        $this->assertNotSame(PicketStore::lockName('App\A'), PicketStore::lockName('App\B'));
    }
}
