-- release: delete a lease, only if the caller holds it, and wake waiters.
-- (Embedded after counter.lua, leases.lua and hold.lua; counter.lua's
-- guard checks the counter first: a
-- release is the last moment the live fence is in Redis, so a counter
-- another writer lowered is raised back before the grant goes.)
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence; ARGV[1] = lease id,
-- ARGV[2] = release channel, ARGV[3] = lock name (the message, so every
-- picketd can wake its waiters), ARGV[4] = counter idle TTL in ms ("0":
-- the counter never expires). KEYS[3] = the index of held names
-- (acquire.lua): the name leaves it. KEYS[4] (only for a token with
-- max_leases, outside Redis Cluster) = P{/token/TOKEN}:leases: the lock
-- leaves the token's count in the same call (leases.lua).
-- Returns {1, tamper, "", at} when released (before its expiry: a
-- lock-delay is skipped; at: the grant's time, 0 if unknown), {0, tamper,
-- why} when the lease is lost (why: hold_broken's);
-- tamper is "" or why the counter was repaired. The fence counter is
-- kept: with an idle TTL it expires at most that long after the release (it no
-- longer has a lease to outlive); without one, never.
local _, cur, live, tamper = guard(ARGV[4])
-- a lease past its expiry is lost, and its lock-delay stands (hold.lua)
if cur == ARGV[1] and not (hold.exp and hold_delaying(hold_now())) then
  if KEYS[4] then leases_drop(KEYS[4], ARGV[3]) end
  local at = tonumber(redis.call('HGET', KEYS[1], 'at') or '0') or 0
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[3], ARGV[3] .. ' l')
  -- The counter got max(idle TTL, the lease's life) at the grant or last
  -- renewal. A life no longer than the idle TTL means it expires within
  -- the idle TTL of now already: only a longer lease's counter is cut back
  -- (a write the plain cycle does not pay: bench/ab, issue 39).
  local idle = tonumber(ARGV[4])
  if idle > 0 and not (hold.ttl and hold.ttl + (hold.delay or 0) <= idle) then
    redis.call('PEXPIRE', KEYS[2], idle)
  end
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  events_emit(KEYS[1], 'r', live, 0)
  return {1, tamper, '', at}
end
return {0, tamper, hold_broken(KEYS[1], ARGV[1])}
