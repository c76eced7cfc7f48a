-- leases.lua: a token's count of held leases, for its max_leases (issue 16,
-- moved into the lock scripts by issue 28). Not a script of its own:
-- proto/CMakeLists.txt puts it in front of acquire.lua, renew.lua,
-- release.lua and quota.lua, so all four keep the count one way.
--
-- The count is a sorted set, P{/token/TOKEN}:leases: member = lock name,
-- score = when that lease expires (ms, Redis TIME). The '/' in the hash tag
-- cannot occur in a lock name, so the key never meets a lock's keys. The set
-- expires with its last lease, so an idle token leaves no key.
--
-- Where it runs: on one Redis (alone or under Sentinel) the lock scripts
-- take it as their last key and change it in the same atomic call as the
-- grant, renew or release: one EVALSHA per lock call. Under Redis Cluster
-- the set lives in the token's slot, not the lock's, and one script cannot
-- touch two slots, so picketd runs quota.lua on the token's slot before a
-- grant (take) and after a renew or release (touch, drop): see quota.lua.

-- Now in ms, from a TIME reply (t, when the caller has read one) or a new one.
local function leases_now(t)
  t = t or redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The set lives as long as its longest lease: every add and touch moves
-- its expiry out to theirs, never in (PTTL is -1 for a set just made).
-- PTTL and PEXPIREAT rather than reading the top score: the expiry already
-- covers every entry, so only a later one can move it.
local function leases_keep(key, expiry, now)
  if redis.call('PTTL', key) <= expiry - now then redis.call('PEXPIREAT', key, expiry) end
end

-- Whether `name` may be counted in under `max`: forgets leases past their
-- expiry first. 2 when counted already (a same-lease retry, or an entry of
-- a grant that ended without a release, such as a broken lock), 1 when
-- there is room, 0 when the token holds max. Writes only the forgetting,
-- and fails (WRONGTYPE) before any write of the caller's.
local function leases_room(key, name, max, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZSCORE', key, name) then return 2 end
  if redis.call('ZCARD', key) >= max then return 0 end
  return 1
end

-- Whether a grant of `name` would go past `max` (acquire.lua): ZCARD
-- alone while the set has room. Entries of leases that expired without a
-- release are forgotten only once the set looks full (leases_room), so a
-- grant costs one call here, and at most `max` stale entries wait.
local function leases_full(key, name, max, now)
  if redis.call('ZCARD', key) < max then return false end
  return leases_room(key, name, max, now) == 0
end

-- Counts `name` in (or moves its expiry) until now + ttl_ms.
local function leases_add(key, name, ttl_ms, now)
  local expiry = now + ttl_ms
  redis.call('ZADD', key, expiry, name)
  leases_keep(key, expiry, now)
end

-- A renew: moves a counted lock's expiry, never back. Fails (WRONGTYPE)
-- before writing: the caller runs it before its own writes.
local function leases_touch(key, name, ttl_ms, now)
  local expiry = now + ttl_ms
  redis.call('ZADD', key, 'XX', 'GT', expiry, name)
  leases_keep(key, expiry, now)
end

local function leases_drop(key, name)
  redis.call('ZREM', key, name)
end
