-- renew: extend a lease, only if the caller still holds it.
-- KEYS[1] = P{NAME}:lease; ARGV[1] = lease id, ARGV[2] = ttl in ms.
-- Returns the grant's fence (>= 1) when renewed, 0 when the lease is lost
-- (expired, released, or never this caller's).
if redis.call('HGET', KEYS[1], 'lease') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('HGET', KEYS[1], 'fence'))
end
return 0
