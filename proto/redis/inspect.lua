#!lua flags=no-writes
-- inspect: what anyone may know about a lock. Never returns the lease id,
-- which is the holder's secret.
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence.
-- Returns {last fence issued, held (0/1), pttl ms, owner, delay ms, at,
-- renewals, value} (value: the lease's `val`, an election leader's, or ""): delay is how long a lease that expired with a lock-delay
-- (hold.lua) still keeps the lock from being granted (then held is 0),
-- else 0; at is the grant's time (Redis TIME, ms; 0 for a grant made
-- before picketd stamped it) and renewals how often it was renewed. The fence is a
-- decimal string (never a Lua number, which is exact only below 2^53).
-- While a grant is live its fence is the last one issued (a lock is
-- granted only while none is live), so that is what is said, whatever the
-- counter holds: another writer's change to the counter shows nothing
-- false here, and the next acquire, renew or release repairs it
-- (counter.lua; this script is read-only and cannot). With no grant: the
-- counter, or "0" when there is none (never granted, or the counter
-- expired after --fence-idle-ttl-ms). A fence that is not a count raises
-- PICKET_TAMPERED: nothing true can be said of that lock.
-- (Not embedded after counter.lua: the no-writes line must come first.)
local function count_or_refuse(s, key, zero_ok)
  if (zero_ok and s == '0') or (string.match(s, '^[1-9]%d*$') and
      (#s < 19 or (#s == 19 and s <= '9223372036854775807'))) then
    return s
  end
  error(redis.error_reply('PICKET_TAMPERED the fence in ' .. key ..
    ' is not a count (another writer changed it)'))
end
local h = redis.call('HMGET', KEYS[1], 'lease', 'fence', 'owner', 'exp', 'at', 'rn', 'val')
if h[1] then
  local fence = count_or_refuse(h[2] or '', KEYS[1], false)
  local pttl = redis.call('PTTL', KEYS[1])
  if h[4] then -- a lease with a lock-delay (hold.lua): its own expiry
    local t = redis.call('TIME')
    local left = tonumber(h[4]) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    if left <= 0 then return {fence, 0, 0, '', pttl, 0, 0, ''} end
    pttl = left
  end
  return {fence, 1, pttl, h[3] or '', 0, tonumber(h[5] or '0') or 0,
          tonumber(h[6] or '0') or 0, h[7] or ''}
end
return {count_or_refuse(redis.call('GET', KEYS[2]) or '0', KEYS[2], true), 0, 0, '', 0, 0, 0, ''}
