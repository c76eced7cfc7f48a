<?php

declare(strict_types=1);

namespace Picket\Lock\Tests;

require_once __DIR__ . '/upstream/symfony-lock/AbstractStoreTestCase.php';

use Picket\Lock\PicketStore;
use Symfony\Component\Lock\PersistingStoreInterface;
use Symfony\Component\Lock\Tests\Store\AbstractStoreTestCase;

/**
 * symfony/lock's own store test cases (upstream/symfony-lock, unchanged)
 * against PicketStore with its default options (plain picketd locks) on a
 * real picketd (PICKET_URL). Their resources (uniqid(__METHOD__)) hold "\",
 * so they map to "h." names.
 */
final class PicketStoreUpstreamTest extends AbstractStoreTestCase
{
    protected function getStore(): PersistingStoreInterface
    {
        return new PicketStore(picket_url());
    }
}
