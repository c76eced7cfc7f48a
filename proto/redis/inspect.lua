#!lua flags=no-writes
-- inspect: what anyone may know about a lock. Never returns the lease id,
-- which is the holder's secret.
-- KEYS[1] = P{NAME}:lease, KEYS[2] = P{NAME}:fence.
-- Returns {last fence issued, held (0/1), pttl ms, owner}. The fence is a
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
local lease = redis.call('HGET', KEYS[1], 'lease')
if lease then
  return {count_or_refuse(redis.call('HGET', KEYS[1], 'fence') or '', KEYS[1], false), 1,
          redis.call('PTTL', KEYS[1]), redis.call('HGET', KEYS[1], 'owner') or ''}
end
return {count_or_refuse(redis.call('GET', KEYS[2]) or '0', KEYS[2], true), 0, 0, ''}
