-- semaphore: acquire, renew or release one permit of a counting semaphore,
-- atomically. (Embedded after counter.lua, leases.lua and hold.lua.)
--
-- A semaphore NAME with limit N has N slots, 0..N-1. A permit is a lease on
-- one slot, exactly as a lock's: a hash with lease, fence, owner, ttl (and
-- lock-delay and hold-cap fields, hold.lua) and a PX expiry, and a fence
-- counter of its own, so fences strictly increase per slot with the same
-- clock floor and guard as a lock's. A fenced store checks a permit's fence
-- under the lock name NAME:permit:I (the grant says so), one per slot.
-- Every key shares the hash tag {NAME}; they are derived here from KEYS[1]:
--   KEYS[1]           = P{NAME}:sem   hash {limit}: the limit the live
--                       permits use; forgotten with the last of them
--   KEYS[1]:held      sorted set: slot -> its key's expiry (ms, Redis TIME)
--   KEYS[1]:I:lease   slot I's lease hash
--   KEYS[1]:I:fence   slot I's fence counter
--   KEYS[1]:by:LEASE  the slot LEASE holds, with the slot's expiry
-- KEYS[2] = the index of held names (acquire.lua): a grant puts "NAME s"
--   into it, the last permit's release takes it out.
-- KEYS[3] = P{/token/TOKEN}:leases, only for a token with max_leases, outside
--   Redis Cluster (leases.lua); the member is ARGV[11].
-- ARGV: [1] verb (acquire, renew, release), [2] lease id, [3] ttl ms,
--   [4] owner, [5] fence floor, [6] counter idle TTL ms, [7] lock_delay_ms,
--   [8] max_hold_ms, [9] limit, [10] max_leases, [11] the count's member,
--   [12] release channel, [13] the release message. Unused ones are "".
--
-- acquire returns {1, fence, created, tamper, ttl, slot} (a retry by the
--   same lease: its slot, its fence, created 0); {0, retry_ms, "", tamper,
--   0, -1} when all N slots are taken (retry_ms: until the first frees);
--   {2, 0, "", tamper, 0, -1} when the token holds max_leases; {4, limit,
--   "", tamper, 0, -1} when the live permits use another limit.
-- renew returns {fence, tamper, ttl, slot} or {0, tamper, 0, -1} (lost).
-- release returns {1, tamper} or {0, tamper} (lost), and publishes the
--   release message so waiters wake.
-- tamper is "" or why a slot's counter was repaired (counter.lua).

local base = KEYS[1]
local held = base .. ':held'
local quota = KEYS[3]
local lease_id, verb = ARGV[2], ARGV[1]
local by = base .. ':by:' .. lease_id
local function slot_keys(i)
  return base .. ':' .. i .. ':lease', base .. ':' .. i .. ':fence'
end
local idle = tonumber(ARGV[6])

-- the counter's expiry: the idle TTL, never shorter than the slot's key
local function counter_keep(fk, life)
  if idle > 0 then redis.call('PEXPIRE', fk, math.max(idle, life)) end
end

-- Records slot i's key expiry (ms) in the held set, the lease's slot
-- entry and the limit hash; the hash lives as long as its last permit.
local function keep(i, expiry, now)
  redis.call('ZADD', held, expiry, i)
  redis.call('SET', by, i, 'PX', math.max(1, expiry - now))
  if redis.call('PTTL', base) < expiry - now then redis.call('PEXPIREAT', base, expiry) end
  if redis.call('PTTL', held) < expiry - now then redis.call('PEXPIREAT', held, expiry) end
end

local now = hold_now()
redis.call('ZREMRANGEBYSCORE', held, '-inf', now)
local mine = redis.call('GET', by)

if verb == 'renew' or verb == 'release' then
  if not mine then return verb == 'renew' and {0, '', 0, -1} or {0, ''} end
  local lk, fk = slot_keys(mine)
  local _, cur, live, tamper = guard(idle, lk, fk)
  if cur ~= lease_id or hold_delaying(now) then
    return verb == 'renew' and {0, tamper, 0, -1} or {0, tamper}
  end
  if verb == 'release' then
    if quota then leases_drop(quota, ARGV[11]) end
    redis.call('DEL', lk, by)
    redis.call('ZREM', held, mine)
    if idle > 0 then redis.call('PEXPIRE', fk, idle) end
    if redis.call('ZCARD', held) == 0 then
      redis.call('DEL', base, held)
      redis.call('ZREM', KEYS[2], ARGV[13]:sub(3) .. ' s')
    end
    redis.call('PUBLISH', ARGV[12], ARGV[13])
    return {1, tamper}
  end
  local ttl = hold_set(now, tonumber(ARGV[3]), hold.delay, hold.cap, lk)
  if ttl == 0 then return {0, tamper, 0, -1} end
  if quota then leases_touch(quota, ARGV[11], ttl, now) end
  local life = ttl + (hold.delay or 0)
  keep(mine, now + life, now)
  counter_keep(fk, life)
  return {live, tamper, ttl, tonumber(mine)}
end

-- acquire
local limit = tonumber(ARGV[9])
local ttl, delay, cap_ms = tonumber(ARGV[3]), tonumber(ARGV[7]), tonumber(ARGV[8])
local count = redis.call('ZCARD', held)
local stored = tonumber(redis.call('HGET', base, 'limit') or '')
if count > 0 and stored and stored ~= limit then return {4, stored, '', '', 0, -1} end

if mine then -- a retry by a lease that holds a permit
  local lk, fk = slot_keys(mine)
  local _, cur, live, tamper = guard(idle, lk, fk)
  if cur == lease_id and not hold_delaying(now) then
    local given = hold_set(now, ttl, hold.delay, hold.cap, lk)
    if given > 0 then
      if quota then leases_add(quota, ARGV[11], given, now) end
      local life = given + (hold.delay or 0)
      keep(mine, now + life, now)
      counter_keep(fk, life)
      return {1, live, 0, tamper, given, tonumber(mine)}
    end
  end
  -- lost (expired, in its delay, at its cap): a new acquire, below
end

if count >= limit then
  local first = redis.call('ZRANGE', held, 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(first[2]) - now), '', '', 0, -1}
end
if quota and leases_full(quota, ARGV[11], tonumber(ARGV[10]), now) then
  return {2, 0, '', '', 0, -1}
end
-- the lowest free slot
local taken = {}
for _, s in ipairs(redis.call('ZRANGE', held, 0, -1)) do taken[tonumber(s)] = true end
local slot = 0
while taken[slot] do slot = slot + 1 end

local lk, fk = slot_keys(slot)
local last, cur, _, tamper = guard(idle, lk, fk)
if cur then
  -- Not in the held set, yet live: the set lost it (another writer). Count
  -- it again and report the semaphore full for now, writing no grant.
  local left = redis.call('PTTL', lk)
  redis.call('ZADD', held, now + math.max(left, 1), slot)
  return {0, math.max(left, 1), '', tamper, 0, -1}
end
local fence, why = fence_next(last, fk, ARGV[5])
if why ~= '' then tamper = why end
local given = cap_ms > 0 and math.min(ttl, cap_ms) or ttl
local life = given + delay
if idle > 0 then
  redis.call('SET', fk, fence, 'PX', math.max(idle, life))
else
  redis.call('SET', fk, fence)
end
hold_grant(lk, lease_id, fence, ARGV[4], given, delay, cap_ms, now)
redis.call('ZADD', KEYS[2], 0, ARGV[13]:sub(3) .. ' s') -- ARGV[13] is "s/NAME"
redis.call('HSET', base, 'limit', limit)
keep(slot, now + life, now)
if quota then leases_add(quota, ARGV[11], given, now) end
return {1, fence, 1, tamper, given, slot}
