-- rwlock: acquire, renew or release a read or write lease of a read/write
-- lock, atomically. (Embedded after counter.lua, leases.lua and hold.lua.)
--
-- Many readers or one writer. Every lease is a lease as a lock's is (a
-- hash: lease, fence, owner, ttl, and hold.lua's fields; a PX expiry).
-- One fence counter per rwlock: a write grant takes the next fence (the
-- clock floor and guard as for locks), so it is above every earlier grant
-- of the lock, read or write; a read grant takes the counter as it stands,
-- the fence of the last write grant: the write epoch it reads (a counter
-- that is missing or not a count is advanced first, as a write would).
-- A fenced store checks the fences under the lock name NAME:rw.
-- A writer that waits keeps new readers out (no writer starvation): its
-- acquire with a wait (ARGV[14] > 0) puts its lease into the
-- waiting set until then; a read is refused while anyone is in it, and a
-- grant, or `forget` (the writer stopped waiting), takes the lease out.
-- Keys, one hash tag, derived from KEYS[1] = P{NAME}:rw:
--   :w        the write lease's hash        :fence   the fence counter
--   :r        sorted set: reader lease -> its key's expiry (ms)
--   :r:LEASE  a read lease's hash           :ww      sorted set: waiting
--                                                      writer -> until (ms)
-- KEYS[2] = the index of held names (acquire.lua): a grant puts "NAME r"
--   into it; list.lua takes it out once nobody holds the lock.
-- KEYS[3] = P{/token/TOKEN}:leases (a token with max_leases, outside
--   Redis Cluster); the member is ARGV[11].
-- ARGV: [1] verb (acquire, renew, release, forget), [2] lease, [3] ttl ms,
--   [4] owner, [5] fence floor, [6] counter idle TTL ms, [7] lock_delay_ms,
--   [8] max_hold_ms, [9] mode (read, write), [10] max_leases, [11] the
--   count's member, [12] release channel, [13] the release message,
--   [14] how long this writer will wait (ms; 0: it does not), [15] the most
--   read leases the lock may have (--max-readers; 0: no bound). Unused ones "".
--
-- acquire returns {1, fence, created, tamper, ttl, mode} granted (a retry
--   by the same lease: its fence, created 0); {0, retry_ms, owner, tamper,
--   0, why}: taken (why: "write" a writer holds it, "read" readers do,
--   "waiting" a writer waits, "full" a read found ARGV[15] readers: it
--   changed nothing); {3, retry_ms, owner, tamper, 0, ""}: the
--   last write lease's lock-delay runs; {2, 0, "", tamper, 0, ""}: the
--   token holds max_leases.
-- renew returns {fence, tamper, ttl, mode} or {0, tamper, 0, ""} (lost).
-- release returns {1, tamper} or {0, tamper}; forget returns {1, ""}.

local base = KEYS[1]
local wk, fk, readers, ww = base .. ':w', base .. ':fence', base .. ':r', base .. ':ww'
local quota = KEYS[3]
local verb, lease_id = ARGV[1], ARGV[2]
local rk = base .. ':r:' .. lease_id
local idle = tonumber(ARGV[6])
local now = hold_now()

if verb == 'forget' then
  redis.call('ZREM', ww, lease_id)
  return {1, ''}
end

-- keeps a sorted set's key alive as long as its last member
local function keep_set(key, expiry)
  if redis.call('PTTL', key) < expiry - now then redis.call('PEXPIREAT', key, expiry) end
end

local function counter_keep(life)
  if idle > 0 then redis.call('PEXPIRE', fk, math.max(idle, life)) end
end

redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
redis.call('ZREMRANGEBYSCORE', ww, '-inf', now)
-- the write lease first: its guard checks the counter against it
local last, wcur, wlive, tamper = guard(idle, wk, fk)
local whold = {exp = hold.exp, delay = hold.delay, cap = hold.cap}
local wdelaying = wcur and hold_delaying(now)

-- renew, release: the lease is the writer, or one of the readers
if verb == 'renew' or verb == 'release' then
  local lk, mode = wk, 'write'
  if wcur ~= lease_id then
    local _, rcur, _, rtamper = guard(idle, rk, fk)
    if rtamper ~= '' then tamper = rtamper end
    if rcur ~= lease_id then return verb == 'renew' and {0, tamper, 0, ''} or {0, tamper} end
    lk, mode = rk, 'read'
  else
    hold.exp, hold.delay, hold.cap = whold.exp, whold.delay, whold.cap
  end
  if hold_delaying(now) then return verb == 'renew' and {0, tamper, 0, ''} or {0, tamper} end
  if verb == 'release' then
    if quota then leases_drop(quota, ARGV[11]) end
    redis.call('DEL', lk)
    if mode == 'read' then redis.call('ZREM', readers, lease_id) end
    redis.call('PUBLISH', ARGV[12], ARGV[13])
    return {1, tamper}
  end
  local ttl = hold_set(now, tonumber(ARGV[3]), hold.delay, hold.cap, lk)
  if ttl == 0 then return {0, tamper, 0, ''} end
  if quota then leases_touch(quota, ARGV[11], ttl, now) end
  local life = ttl + (hold.delay or 0)
  if mode == 'read' then
    redis.call('ZADD', readers, now + life, lease_id)
    keep_set(readers, now + life)
  end
  counter_keep(life)
  return {redis.call('HGET', lk, 'fence'), tamper, ttl, mode}
end

-- acquire
local mode, ttl = ARGV[9], tonumber(ARGV[3])
local delay, cap_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
local wait_until = (tonumber(ARGV[14]) or 0) > 0 and now + tonumber(ARGV[14]) or 0

-- a same-lease retry refreshes the lease it holds
local function refresh(lk, h, live)
  local given = hold_set(now, ttl, h.delay, h.cap, lk)
  if given == 0 then return nil end
  if quota then leases_add(quota, ARGV[11], given, now) end
  local life = given + (h.delay or 0)
  if lk == rk then
    redis.call('ZADD', readers, now + life, lease_id)
    keep_set(readers, now + life)
  end
  counter_keep(life)
  return {1, live, 0, tamper, given, mode}
end

if wcur == lease_id and not wdelaying and mode == 'write' then
  local r = refresh(wk, whold, wlive)
  if r then return r end
end
if wdelaying then
  return {3, redis.call('PTTL', wk), redis.call('HGET', wk, 'owner') or '', tamper, 0, ''}
end
if wcur then
  if mode == 'write' and wait_until > now then
    redis.call('ZADD', ww, wait_until, lease_id)
    keep_set(ww, wait_until)
  end
  local left = whold.exp and (whold.exp - now) or redis.call('PTTL', wk)
  return {0, math.max(left, 1), redis.call('HGET', wk, 'owner') or '', tamper, 0, 'write'}
end

if mode == 'read' then
  local _, rcur, rlive = guard(idle, rk, fk)
  if rcur == lease_id and not hold_delaying(now) then
    local r = refresh(rk, hold, rlive)
    if r then return r end
  end
  local first = redis.call('ZRANGE', ww, 0, 0, 'WITHSCORES')
  if first[1] then -- a writer waits: readers queue behind it
    return {0, math.max(tonumber(first[2]) - now, 1), '', tamper, 0, 'waiting'}
  end
  -- at most ARGV[15] read leases: each costs every listing and inspect of
  -- the lock, so one tenant's readers cannot grow them without end; the
  -- refused reader may try again when the first of them ends
  local most = tonumber(ARGV[15]) or 0
  if most > 0 and redis.call('ZCARD', readers) >= most then
    local soonest = redis.call('ZRANGE', readers, 0, 0, 'WITHSCORES')
    return {0, math.max(tonumber(soonest[2]) - now, 1), '', tamper, 0, 'full'}
  end
else
  local first = redis.call('ZRANGE', readers, 0, 0, 'WITHSCORES')
  if first[1] then
    if wait_until > now then
      redis.call('ZADD', ww, wait_until, lease_id)
      keep_set(ww, wait_until)
    end
    return {0, math.max(tonumber(first[2]) - now, 1), '', tamper, 0, 'read'}
  end
end

if quota and leases_full(quota, ARGV[11], tonumber(ARGV[10]), now) then
  return {2, 0, '', tamper, 0, ''}
end
local given = cap_ms > 0 and math.min(ttl, cap_ms) or ttl
local life = given + delay
local fence
if mode == 'write' or not (last and is_count(last) and last ~= '0') then
  local why
  fence, why = fence_next(last, fk, ARGV[5])
  if why ~= '' then tamper = why end
  if idle > 0 then
    redis.call('SET', fk, fence, 'PX', math.max(idle, life))
  else
    redis.call('SET', fk, fence)
  end
else
  fence = last -- a read: the last write's fence, the epoch it reads
  counter_keep(life)
end
if mode == 'write' then
  hold_grant(wk, lease_id, fence, ARGV[4], given, delay, cap_ms, now)
  redis.call('ZREM', ww, lease_id)
else
  hold_grant(rk, lease_id, fence, ARGV[4], given, delay, cap_ms, now)
  redis.call('ZADD', readers, now + life, lease_id)
  keep_set(readers, now + life)
end
redis.call('ZADD', KEYS[2], 0, ARGV[13]:sub(3) .. ' r') -- ARGV[13] is "r/NAME"
if quota then leases_add(quota, ARGV[11], given, now) end
return {1, fence, 1, tamper, given, mode}
