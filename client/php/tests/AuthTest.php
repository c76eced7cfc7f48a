<?php

declare(strict_types=1);

namespace Picket\Lock\Tests;

use Picket\Lock\PicketStore;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Key;

/**
 * Against a picketd with --auth-file and --fence-key-file (PICKET_AUTH_URL;
 * the token PICKET_TEST_TOKEN may lock names under "php-test." and "h.").
 */
final class AuthTest extends TestCase
{
    protected function tearDown(): void
    {
        putenv('PICKET_TOKEN');
    }

    public function testNoTokenIsRefused(): void
    {
        putenv('PICKET_TOKEN');
        $s = new PicketStore(picket_url('PICKET_AUTH_URL'));
        try {
            $s->save(new Key(picket_resource('auth')));
            $this->fail('saved without a token');
        } catch (LockAcquiringException $e) {
            $this->assertSame(401, $e->getPrevious()->status);
        }
        $s = new PicketStore(picket_url('PICKET_AUTH_URL'), ['token' => 'pkt_wrong']);
        $this->expectException(LockAcquiringException::class);
        $s->save(new Key(picket_resource('auth')));
    }

    public function testTokenOptionAndSignedFence(): void
    {
        $s = new PicketStore(picket_url('PICKET_AUTH_URL'), ['token' => picket_url('PICKET_TEST_TOKEN')]);
        $k = new Key('App\Auth\Mapped::name');
        $s->save($k);
        $this->assertMatchesRegularExpression('/^v2\.lock\.k1\.[0-9a-f]{64}$/', $s->fenceToken($k));
        $this->assertTrue($s->exists($k));
        $s->delete($k);
        $this->assertFalse($s->exists($k));
    }

    public function testTokenFromEnvironment(): void
    {
        putenv('PICKET_TOKEN=' . picket_url('PICKET_TEST_TOKEN'));
        $s = new PicketStore(picket_url('PICKET_AUTH_URL'));
        $k = new Key(picket_resource('auth-env'));
        $s->save($k);
        $this->assertTrue($s->exists($k));
        $s->delete($k);
        // Outside the token's prefixes: 403, LockAcquiringException.
        try {
            $s->save(new Key('payroll.x'));
            $this->fail('locked outside its prefixes');
        } catch (LockAcquiringException $e) {
            $this->assertSame(403, $e->getPrevious()->status);
        }
    }
}
