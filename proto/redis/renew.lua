-- renew: extend a lease, only if the caller still holds it.
-- (Embedded after counter.lua, whose guard checks the counter first, and
-- leases.lua.)
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence, KEYS[3] (only for a
-- token with max_leases, outside Redis Cluster) = P{/token/TOKEN}:leases;
-- ARGV[1] = lease id, ARGV[2] = ttl in ms,
-- ARGV[3] = counter idle TTL in ms ("0": the counter never expires),
-- ARGV[4] = lock name, with KEYS[3]: a renewal moves its expiry there too.
-- Returns {fence, tamper} when renewed: the grant's fence (a decimal
-- string, as acquire.lua stored it); or {0, tamper} when the lease is lost
-- (expired, released, or never this caller's). tamper is "" or why the
-- guard repaired the counter (counter.lua). With an idle TTL the counter's
-- expiry moves too, never to less than the lease's, so it outlives the
-- grant it counts.
local _, cur, live, tamper = guard(ARGV[3])
if cur == ARGV[1] then
  if KEYS[3] then leases_touch(KEYS[3], ARGV[4], tonumber(ARGV[2]), leases_now()) end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[1], 'ttl', ARGV[2])
  local idle = tonumber(ARGV[3])
  if idle > 0 then
    redis.call('PEXPIRE', KEYS[2], math.max(idle, tonumber(ARGV[2])))
  end
  return {live, tamper}
end
return {0, tamper}
