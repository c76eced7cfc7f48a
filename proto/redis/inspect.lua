#!lua flags=no-writes
-- inspect: what anyone may know about a lock. Never returns the lease id,
-- which is the holder's secret.
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence.
-- Returns {last fence issued (0 if never), held (0/1), pttl ms, owner}.
local fence = tonumber(redis.call('GET', KEYS[2]) or '0')
local lease = redis.call('HGET', KEYS[1], 'lease')
if not lease then
  return {fence, 0, 0, ''}
end
return {fence, 1, redis.call('PTTL', KEYS[1]), redis.call('HGET', KEYS[1], 'owner') or ''}
