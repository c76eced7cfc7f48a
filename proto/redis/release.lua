-- release: delete a lease, only if the caller holds it, and wake waiters.
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence; ARGV[1] = lease id,
-- ARGV[2] = release channel, ARGV[3] = lock name (the message, so every
-- picketd can wake its waiters), ARGV[4] = counter idle TTL in ms ("0":
-- the counter never expires).
-- Returns 1 when released, 0 when the lease is lost. The fence counter is
-- kept: with an idle TTL it now expires that long after the release (it no
-- longer has a lease to outlive); without one, never.
if redis.call('HGET', KEYS[1], 'lease') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
