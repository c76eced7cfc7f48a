#!lua flags=no-writes
-- inspect: what anyone may know about a lock. Never returns the lease id,
-- which is the holder's secret.
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence.
-- Returns {last fence issued, held (0/1), pttl ms, owner}. The fence is a
-- decimal string (never a Lua number, which is exact only below 2^53):
-- the counter, or "0" when there is none (never granted, or the counter
-- expired after --fence-idle-ttl-ms); a live grant's own fence when the
-- counter is gone but the grant is not.
local fence = redis.call('GET', KEYS[2])
local lease = redis.call('HGET', KEYS[1], 'lease')
if not lease then
  return {fence or '0', 0, 0, ''}
end
return {fence or redis.call('HGET', KEYS[1], 'fence'), 1, redis.call('PTTL', KEYS[1]),
        redis.call('HGET', KEYS[1], 'owner') or ''}
