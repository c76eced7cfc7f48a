-- acquire: grant a lease on one lock, with a fence, atomically.
-- (Embedded after counter.lua, leases.lua and hold.lua: greater, is_count,
-- guard, hold and MAX are counter.lua's, leases_* are leases.lua's, hold_*
-- hold.lua's.)
-- KEYS[1] = P{NAME}:lease (hash lease/fence/owner/ttl, PX expiry)
-- KEYS[2] = P{NAME}:fence (the counter: the last fence issued)
-- KEYS[3] = the index of held names (list.lua): P:index, or under Redis
--   Cluster the index of NAME's hash slot (in the same slot as KEYS[1])
-- KEYS[4] = P{/token/TOKEN}:leases, only for a token with max_leases, and
--   only outside Redis Cluster (leases.lua says why)
-- ARGV[1] = lease id (32 hex), ARGV[2] = ttl in ms, ARGV[3] = owner ("" = none),
-- ARGV[4] = fence floor: "clock" or "none",
-- ARGV[5] = counter idle TTL in ms, "0" for a counter that never expires,
-- ARGV[6] = lock_delay_ms ("0": none), ARGV[7] = max_hold_ms ("0": none)
-- (hold.lua), ARGV[8] = max_leases (with KEYS[4]), ARGV[9] = lock name,
-- ARGV[10] = the token whose max_leases counts this lease ("" none): kept
-- in the lease as `qt`, so that a break (break.lua) can give its place back.
-- ARGV[11] = the lease's value, optional (an election's leader's,
-- docs/elections.md; "" for none): kept in the lease as `val` by a new
-- grant and set again by a retry (proclaim changes it: renew.lua).
--
-- Every reply has a fifth element: the TTL given (ms), which is ARGV[2]
-- unless the hold cap cut it (0 in a reply that grants nothing).
-- Returns {1, fence, 1, tamper, ttl} for a new grant: fence = counter + 1, or
--   with the clock floor max(counter + 1, Redis TIME in microseconds),
--   stored back into the counter. A lost counter counts as 0: with the
--   clock floor the next fence is still above every fence issued before
--   (proto/README.md says under which assumption). A new grant puts
--   "NAME l" into the index and stamps the lease with `at` (Redis TIME,
--   ms): GET /v1/locks lists it from there.
-- Returns {1, fence, 0, tamper, ttl} for a retry by the same lease id while
--   its grant is live (same fence, TTL refreshed, owner kept; the delay and
--   cap it was granted with kept too).
-- Returns {3, pttl, owner, tamper, 0} when the last lease expired (no
--   release) and its lock-delay has pttl ms to run: nobody gets the lock
--   before, the lease's own id neither (it was lost).
-- Returns {0, pttl, owner, tamper, 0} when another lease holds the lock;
--   pttl is never above the grant's ttl (an expiry further out is cut back:
--   see below).
-- Returns {2, 0, "", tamper, 0} when the lock is free but the token (KEYS[3])
--   holds max_leases: nothing is granted. A new grant counts the lock into
--   KEYS[3], a retry moves its expiry; a lock held by another lease is not
--   the token's and is not counted.
-- tamper is "" or why the counter had to be repaired (counter.lua): the
--   caller counts and logs it. The call still succeeds: the repair is
--   certain, made in this very script before the reply.
--
-- A counter that is not a count with no live grant to repair it from:
--   with the clock floor it counts as lost (0: the next fence is the clock,
--   the same promise as after a FLUSHALL), tamper "invalid"; with
--   --fence-floor none nothing says which fences were issued, so the call
--   is refused with PICKET_TAMPERED and nothing is written (fail closed:
--   an operator sets the counter to at least the highest fence storage
--   has seen).
--
-- A fence is a decimal string, 1..2^63-1, and never a Lua number: Lua
-- numbers are doubles, exact only below 2^53, so INCR's reply (a number in
-- Lua) would repeat fences above it. The counter is counted up as a string.
--
-- Order matters: Redis does not roll back a script that fails half way, so
-- everything that can fail (a wrong-type key, a counter that is not a count,
-- a counter at its top) is checked before the first write. The guard's
-- repair is a write, but it happens only while a grant is live, and then
-- nothing after it can fail.

-- the counter's expiry: the idle TTL, never shorter than the lease key
-- (which lives `life` ms: its TTL, and its lock-delay after it)
local function counter_px(life)
  local idle = tonumber(ARGV[5])
  if idle == 0 then return nil end
  return math.max(idle, life)
end

local quota = KEYS[4]
local ttl, delay, cap_ms = tonumber(ARGV[2]), tonumber(ARGV[6]), tonumber(ARGV[7])
-- read once: the count's clock, the floor's below, and the delay's and cap's
local time = (quota or delay > 0 or cap_ms > 0) and redis.call('TIME')
local now_ms = time and hold_now(time)
local last, cur, live, tamper = guard(ARGV[5])
if cur and hold.exp then
  now_ms = now_ms or hold_now()
  if hold_delaying(now_ms) then
    return {3, redis.call('PTTL', KEYS[1]), redis.call('HGET', KEYS[1], 'owner') or '', tamper, 0}
  end
end
if cur == ARGV[1] then
  local given = ttl
  if hold.exp or hold.cap then
    now_ms = now_ms or hold_now()
    given = hold_set(now_ms, ttl, hold.delay, hold.cap)
    if given == 0 then -- at its cap to the ms: over
      return {0, 1, redis.call('HGET', KEYS[1], 'owner') or '', tamper, 0}
    end
  else
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('HSET', KEYS[1], 'ttl', ttl)
  end
  if quota then leases_add(quota, ARGV[9], given, now_ms) end
  if ARGV[11] then
    if ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'val', ARGV[11])
    else redis.call('HDEL', KEYS[1], 'val') end
  end
  local px = counter_px((hold.delay or 0) + given)
  if px then redis.call('PEXPIRE', KEYS[2], px) end
  return {1, live, 0, tamper, given}
end
if cur then
  -- A live grant never has more left than the TTL it was given or last
  -- renewed with. More means this node's clock and the expiry disagree:
  -- the clock stepped back after the grant, or the grant was written under
  -- a clock that was ahead (Redis replicates an expiry as an absolute
  -- time, so a failover to a replica whose clock is behind the old
  -- primary's carries the difference over). Left alone the lock would
  -- stay taken for the whole step; cut back to the TTL it is still at
  -- least as long as its holder may believe in it (the holder counts its
  -- TTL from before it sent the request). A lease with a lock-delay keeps
  -- its own expiry in `exp`, cut back the same way.
  local had = tonumber(redis.call('HGET', KEYS[1], 'ttl') or '')
  local left
  if hold.exp then
    left = hold.exp - now_ms
    if had and left > had then
      redis.call('HSET', KEYS[1], 'exp', now_ms + had)
      redis.call('PEXPIRE', KEYS[1], had + (hold.delay or 0))
      left = had
    end
  else
    left = redis.call('PTTL', KEYS[1])
    if had and left > had then
      redis.call('PEXPIRE', KEYS[1], had)
      left = had
    end
  end
  return {0, left, redis.call('HGET', KEYS[1], 'owner') or '', tamper, 0}
end

if quota and leases_full(quota, ARGV[9], tonumber(ARGV[8]), now_ms) then
  return {2, 0, '', tamper, 0}
end
time = time or redis.call('TIME') -- the grant's `at`, and the clock floor's
now_ms = now_ms or hold_now(time)
local fence, why = fence_next(last, KEYS[2], ARGV[4], time)
if why ~= '' then tamper = why end

local given = cap_ms > 0 and math.min(ttl, cap_ms) or ttl
local px = counter_px(given + delay)
if px then
  redis.call('SET', KEYS[2], fence, 'PX', px)
else
  redis.call('SET', KEYS[2], fence)
end
hold_grant(KEYS[1], ARGV[1], fence, ARGV[3], given, delay, cap_ms, now_ms)
redis.call('ZADD', KEYS[3], 0, ARGV[9] .. ' l')
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'qt', ARGV[10]) end
if ARGV[11] and ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'val', ARGV[11]) end
if quota then leases_add(quota, ARGV[9], given, now_ms) end
events_emit(KEYS[1], 'g', fence, given, ARGV[3])
return {1, fence, 1, tamper, given}
