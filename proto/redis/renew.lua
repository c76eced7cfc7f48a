-- renew: extend a lease, only if the caller still holds it.
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence;
-- ARGV[1] = lease id, ARGV[2] = ttl in ms,
-- ARGV[3] = counter idle TTL in ms ("0": the counter never expires).
-- Returns the grant's fence (a decimal string, as acquire.lua stored it)
-- when renewed, or the integer 0 when the lease is lost (expired, released,
-- or never this caller's). With an idle TTL the counter's expiry moves too,
-- never to less than the lease's, so it outlives the grant it counts.
if redis.call('HGET', KEYS[1], 'lease') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local idle = tonumber(ARGV[3])
  if idle > 0 then
    redis.call('PEXPIRE', KEYS[2], math.max(idle, tonumber(ARGV[2])))
  end
  return redis.call('HGET', KEYS[1], 'fence')
end
return 0
