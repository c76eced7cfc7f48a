-- renew: extend a lease, only if the caller still holds it.
-- (Embedded after counter.lua, whose guard checks the counter first,
-- leases.lua and hold.lua.)
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence, KEYS[3] (only for a
-- token with max_leases, outside Redis Cluster) = P{/token/TOKEN}:leases;
-- ARGV[1] = lease id, ARGV[2] = ttl in ms,
-- ARGV[3] = counter idle TTL in ms ("0": the counter never expires),
-- ARGV[4] = lock name, with KEYS[3]: a renewal moves its expiry there too.
-- ARGV[5] = "v" for a proclaim (docs/elections.md): the lease's value
-- becomes ARGV[6] ("" removes it), in the same call as the renewal; and
-- ARGV[2] "0" renews with the TTL the lease has (its `ttl`).
-- Returns {fence, tamper, ttl, "", at} when renewed: the grant's fence (a
-- decimal string, as acquire.lua stored it), the TTL given, ARGV[2]
-- unless the lease's hold cap cut it (hold.lua), and the grant's time `at`
-- (0 if unknown), and counts the renewal in the lease's `rn`; or
-- {0, tamper, 0, why, 0} when the lease is lost
-- (expired, also while its lock-delay runs, at its cap, released, broken,
-- or never this caller's); why is hold_broken's. tamper is "" or why the
-- guard repaired the counter (counter.lua). With an idle TTL the counter's
-- expiry moves too, never to less than the lease's, so it outlives the
-- grant it counts.
local _, cur, live, tamper = guard(ARGV[3])
if cur == ARGV[1] then
  local ttl = tonumber(ARGV[2])
  if ttl == 0 then ttl = hold.ttl or 30000 end
  if ARGV[5] == 'v' then
    if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'val', ARGV[6])
    else redis.call('HDEL', KEYS[1], 'val') end
  end
  local now = (KEYS[3] or hold.exp or hold.cap) and hold_now()
  if hold.exp or hold.cap then
    if hold_delaying(now) then return {0, tamper, 0, '', 0} end
    ttl = hold_set(now, ttl, hold.delay, hold.cap)
    if ttl == 0 then return {0, tamper, 0, '', 0} end
  else
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('HSET', KEYS[1], 'ttl', ttl)
  end
  if KEYS[3] then leases_touch(KEYS[3], ARGV[4], ttl, now) end
  local idle = tonumber(ARGV[3])
  if idle > 0 then
    redis.call('PEXPIRE', KEYS[2], math.max(idle, ttl + (hold.delay or 0)))
  end
  redis.call('HINCRBY', KEYS[1], 'rn', 1)
  events_emit(KEYS[1], 'n', live, ttl)
  return {live, tamper, ttl, '', tonumber(redis.call('HGET', KEYS[1], 'at') or '0') or 0}
end
return {0, tamper, 0, hold_broken(KEYS[1], ARGV[1]), 0}
