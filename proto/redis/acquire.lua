-- acquire: grant a lease on one lock, with a fence from INCR, atomically.
-- KEYS[1] = P{NAME}:lease (hash lease/fence/owner, PX expiry)
-- KEYS[2] = P{NAME}:fence (counter; never expires, never deleted)
-- ARGV[1] = lease id (32 hex), ARGV[2] = ttl in ms, ARGV[3] = owner ("" = none)
--
-- Returns {1, fence, 0} when granted: a new grant, or a retry by the same
--   lease id while its grant is live (same fence, TTL refreshed, owner kept).
-- Returns {0, pttl, owner} when another lease holds the lock.
--
-- Order matters: Redis does not roll back a script that fails half way, so
-- every command that can fail on a wrong-type key (HGET, INCR) runs before
-- the first write that could be left behind.
local cur = redis.call('HGET', KEYS[1], 'lease')
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), 0}
end
if cur then
  return {0, redis.call('PTTL', KEYS[1]), redis.call('HGET', KEYS[1], 'owner') or ''}
end
local fence = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'lease', ARGV[1], 'fence', fence, 'owner', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fence, 1}
