-- release: delete a lease, only if the caller holds it, and wake waiters.
-- KEYS[1] = P{NAME}:lease; ARGV[1] = lease id, ARGV[2] = release channel,
-- ARGV[3] = lock name (the message, so every picketd can wake its waiters).
-- Returns 1 when released, 0 when the lease is lost. The fence counter is
-- left alone: it must outlive every lease.
if redis.call('HGET', KEYS[1], 'lease') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
