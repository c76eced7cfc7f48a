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

-- Sets the expiry of KEYS[1] to now + ttl, cut back to the cap, and the
-- delay past it. Returns the TTL given (ms), 0 when the cap has passed
-- (nothing is changed then).
local function hold_set(now, ttl, delay, cap)
  if cap then ttl = math.min(ttl, cap - now) end
  if ttl <= 0 then return 0 end
  if delay and delay > 0 then
    redis.call('HSET', KEYS[1], 'exp', now + ttl, 'ttl', ttl)
    redis.call('PEXPIRE', KEYS[1], ttl + delay)
  else
    redis.call('HSET', KEYS[1], 'ttl', ttl)
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  return ttl
end
