-- break: an operator ends a lock's lease now, and moves its fence on.
-- (Embedded after counter.lua, leases.lua and hold.lua.)
--
-- The fence counter goes to the next fence, as a grant would take it, so
-- every fence the broken holder has or could still send is below it; the
-- reply gives it to the operator, and the next grant's fence is above it.
-- A store that checks fences refuses the broken holder's writes once it
-- has seen the new holder's (or this) fence. The lease key goes (a
-- lock-delay that runs ends too: the operator decided), the name leaves
-- the index, waiters are woken on the release channel, and P{NAME}:broken
-- keeps the lease id, who broke it and when, so the holder's renew and
-- release say why the lease is lost (hold_broken), for as long as the lease
-- had left and at least a minute.
--
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence, KEYS[3] = the index
-- (acquire.lua). ARGV[1] = fence floor ("clock" or "none"), ARGV[2] =
-- counter idle TTL ms ("0": never expires), ARGV[3] = the release channel,
-- ARGV[4] = lock name, ARGV[5] = who breaks it (a token's name or a
-- client's address: it is shown to the broken holder), ARGV[6] = the fence
-- of the only grant to break ("0": whoever holds it). With a fence, a
-- grant of another fence (live or in its lock-delay) is left alone: a
-- retry of a break whose reply was lost must not end the next holder's
-- lease. With no grant there it is a break of a free lock, which keeps
-- P{NAME}:broken, so the broken holder is still told why.
-- Returns {2, its fence, its owner, tamper, its PTTL, ""} when a grant of
-- another fence than ARGV[6] is there (nothing changed), else
-- {broken, fence, owner, tamper, at, token}: broken 1 when a live
-- lease ended (0: none was held; the fence moves on all the same), the new
-- fence (a decimal string), the broken lease's owner ("" for none), tamper
-- as counter.lua's, at the broken lease's grant time (ms; 0 if none or
-- unknown), and the token whose
-- max_leases counted the lease (acquire.lua's `qt`, "" none): the caller
-- drops it from that count (quota.lua), which may live in another slot.
-- Everything that can fail (the counter's checks in guard and fence_next)
-- comes before the first write.
local last, cur, live, tamper = guard(ARGV[2])
local want = tonumber(ARGV[6]) or 0
if want > 0 and cur then
  local h = redis.call('HMGET', KEYS[1], 'fence', 'owner')
  if tonumber(h[1]) ~= want then
    return {2, h[1] or '0', h[2] or '', tamper, math.max(redis.call('PTTL', KEYS[1]), 1), ''}
  end
end
local t = redis.call('TIME')
local now = hold_now(t)
local fence, why = fence_next(last, KEYS[2], ARGV[1], t)
if why ~= '' then tamper = why end
local broken, owner, qt, at = 0, '', '', 0
if cur then
  local h = redis.call('HMGET', KEYS[1], 'owner', 'qt', 'at')
  owner, qt, at = h[1] or '', h[2] or '', tonumber(h[3] or '0') or 0
  if not hold_delaying(now) then
    broken = 1
    local bk = KEYS[1]:sub(1, -6) .. 'broken'
    local left = redis.call('PTTL', KEYS[1])
    redis.call('DEL', bk)
    redis.call('HSET', bk, 'lease', cur, 'by', ARGV[5], 'at', now)
    redis.call('PEXPIRE', bk, math.max(60000, left))
  end
  redis.call('DEL', KEYS[1])
end
redis.call('ZREM', KEYS[3], ARGV[4] .. ' l')
local idle = tonumber(ARGV[2])
if idle > 0 then
  redis.call('SET', KEYS[2], fence, 'PX', idle)
else
  redis.call('SET', KEYS[2], fence)
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
events_emit(KEYS[1], 'b', broken == 1 and live or 0, fence, ARGV[5])
return {broken, fence, owner, tamper, broken == 1 and at or 0, qt}
