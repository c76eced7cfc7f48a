-- hold.lua: lock-delay and the hold cap, for the lease hash KEYS[1]. Put in
-- front of acquire.lua, renew.lua and release.lua when they are embedded,
-- after counter.lua (whose guard reads the fields into `hold`).
--
-- Lock-delay (Consul's): a lease granted with lock_delay_ms > 0 keeps its
-- own expiry in the hash (`exp`, ms of Redis TIME) and `delay`, and the key
-- lives `delay` past `exp`. Once `exp` has passed the lease is over (renew
-- and release say lost) but the name stays taken until the key expires: a
-- holder that paused past its TTL and wakes up is, by then, `delay` ms
-- older, and nobody new was granted in between. A release before `exp`
-- deletes the key, delay and all.
--
-- The hold cap: a lease granted with max_hold_ms > 0 keeps `cap`, its
-- grant time plus max_hold_ms (ms of Redis TIME). No grant, retry or
-- renewal sets the expiry past it: each gets min(ttl, cap - now), and says
-- so in its reply.
--
-- Leases with neither keep neither field and pay nothing here: no TIME.

-- Ms of Redis TIME (t: a TIME reply already read, or nil).
local function hold_now(t)
  t = t or redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- 1 when the lease in KEYS[1] has passed its expiry and waits out its delay.
local function hold_delaying(now)
  return hold.exp ~= nil and now >= hold.exp
end

-- Writes a new grant into the lease hash lk (deleted first): lease id,
-- fence, owner, the TTL given (`given`, already cut to the cap) and, when
-- asked for, its lock-delay (and own expiry) and cap (grant time now +
-- cap_ms), and `at`, the grant's time (ms, listed by list.lua); the key
-- lives given + delay.
local function hold_grant(lk, lease, fence, owner, given, delay, cap_ms, now)
  redis.call('DEL', lk)
  local f = {'lease', lease, 'fence', fence, 'owner', owner, 'ttl', given, 'at', now}
  if delay > 0 then
    for _, v in ipairs({'delay', delay, 'exp', now + given}) do f[#f + 1] = v end
  end
  if cap_ms > 0 then
    for _, v in ipairs({'cap', now + cap_ms}) do f[#f + 1] = v end
  end
  redis.call('HSET', lk, unpack(f))
  redis.call('PEXPIRE', lk, given + delay)
end

-- Sets the expiry of the lease hash lk (default KEYS[1]) to now + ttl,
-- cut back to the cap, and the delay past it. Returns the TTL given (ms),
-- 0 when the cap has passed (nothing is changed then).
local function hold_set(now, ttl, delay, cap, lk)
  lk = lk or KEYS[1]
  if cap then ttl = math.min(ttl, cap - now) end
  if ttl <= 0 then return 0 end
  if delay and delay > 0 then
    redis.call('HSET', lk, 'exp', now + ttl, 'ttl', ttl)
    redis.call('PEXPIRE', lk, ttl + delay)
  else
    redis.call('HSET', lk, 'ttl', ttl)
    redis.call('PEXPIRE', lk, ttl)
  end
  return ttl
end

-- Why lease `lease` of the lock whose lease key is lk is gone, when an
-- operator broke it (break.lua leaves P{NAME}:broken behind: the lease
-- id, who broke it and when, for as long as the lease had left and at
-- least a minute), else "". A renew or release of a broken lease says so.
local function hold_broken(lk, lease)
  local b = redis.call('HMGET', lk:sub(1, -6) .. 'broken', 'lease', 'by', 'at')
  if b[1] ~= lease then return '' end
  return 'broken by ' .. (b[2] or '?') .. ' at ' .. (b[3] or '?')
end
