-- list: one page of the held names in one index, with what an operator
-- asks first: who holds it, since when, how often renewed, which fence.
-- (Embedded after counter.lua, leases.lua and hold.lua, for hold_now.)
--
-- The index is a sorted set of "NAME k" members, all at score 0, so that
-- ZRANGEBYLEX pages through it in name order: k is l (lock), s
-- (semaphore) or r (read/write lock). acquire.lua, semaphore.lua and
-- rwlock.lua put a name in at its grant; a release, a break or the last
-- permit's release takes it out. A lease that expires takes nothing out:
-- this script drops such names as it meets them, so the index holds the
-- names held now plus those that expired since the last listing passed.
-- One index on one Redis (P:index); under Redis Cluster one per hash
-- slot, in that slot, so every script that keeps it stays on one slot.
--
-- KEYS[1] = the index. ARGV[1] = the key prefix P (a name's keys are
-- P{NAME}:...), ARGV[2] = the member after which to start ("" from the
-- first), ARGV[3] = a name prefix ("" for all), ARGV[4] = the most entries
-- to return, ARGV[5] = the most members to look at (a bound on the work
-- of one call, whatever share of them expired).
-- Returns {next, then 9 elements per entry: kind, name, holders, fence,
--   owner, ttl ms, at (ms), renewals, limit}. next is the last member
--   looked at, to pass as ARGV[2] for the rest, or "" when the range has
--   no more. A lock's entry: holders 1, its fence, owner, ttl, at and
--   renewals. A semaphore's: the live permits, fence "0", ttl until the
--   last one expires, its limit. A read/write lock's: the writer (1) or
--   the readers, the writer's or last write's fence, the writer's owner,
--   ttl until the last lease expires. Fences are decimal strings.
local P, after, prefix = ARGV[1], ARGV[2], ARGV[3]
local want, look = tonumber(ARGV[4]), tonumber(ARGV[5])
local min = after ~= '' and '(' .. after or '[' .. prefix
local max = prefix ~= '' and '[' .. prefix .. '\255' or '+'
local members = redis.call('ZRANGEBYLEX', KEYS[1], min, max, 'LIMIT', 0, look)
local now = hold_now()
local out, n, next = {''}, 0, ''

local function lock_entry(name)
  local lk = P .. '{' .. name .. '}:lease'
  local h = redis.call('HMGET', lk, 'lease', 'fence', 'owner', 'exp', 'at', 'rn')
  if not h[1] then return nil, true end
  local ttl = redis.call('PTTL', lk)
  if h[4] then
    ttl = tonumber(h[4]) - now
    if ttl <= 0 then return nil, false end -- its lock-delay runs: not held
  end
  return {'lock', name, 1, h[2] or '0', h[3] or '', ttl, tonumber(h[5] or '0') or 0,
          tonumber(h[6] or '0') or 0, 0}
end

local function sem_entry(name)
  local base = P .. '{' .. name .. '}:sem'
  local held = base .. ':held'
  local live = redis.call('ZCOUNT', held, '(' .. now, '+inf')
  if live == 0 then return nil, redis.call('EXISTS', base) == 0 end
  local last = redis.call('ZRANGE', held, 0, 0, 'REV', 'WITHSCORES')
  local limit = tonumber(redis.call('HGET', base, 'limit') or '0') or 0
  return {'semaphore', name, live, '0', '', tonumber(last[2]) - now, 0, 0, limit}
end

local function rw_entry(name)
  local base = P .. '{' .. name .. '}:rw'
  local w = redis.call('HMGET', base .. ':w', 'lease', 'fence', 'owner', 'exp', 'at', 'rn')
  local wttl = w[1] and redis.call('PTTL', base .. ':w') or -2
  if w[1] and w[4] then wttl = tonumber(w[4]) - now end
  if w[1] and wttl > 0 then
    return {'rwlock', name, 1, w[2] or '0', w[3] or '', wttl, tonumber(w[5] or '0') or 0,
            tonumber(w[6] or '0') or 0, 0}
  end
  local readers = redis.call('ZCOUNT', base .. ':r', '(' .. now, '+inf')
  if readers == 0 then
    return nil, not w[1] and redis.call('EXISTS', base .. ':r') == 0
  end
  local last = redis.call('ZRANGE', base .. ':r', 0, 0, 'REV', 'WITHSCORES')
  return {'rwlock', name, readers, redis.call('GET', base .. ':fence') or '0', '',
          tonumber(last[2]) - now, 0, 0, 0}
end

local entry_of = {l = lock_entry, s = sem_entry, r = rw_entry}
for _, m in ipairs(members) do
  if n == want then break end
  next = m
  local f = entry_of[m:sub(-1)]
  local e, gone
  if f then e, gone = f(m:sub(1, -3)) else gone = true end
  if e then
    for _, v in ipairs(e) do out[#out + 1] = v end
    n = n + 1
  elseif gone then
    redis.call('ZREM', KEYS[1], m)
  end
end
-- the range may go on: past the members looked at, or past a full page
if #members == look or n == want then out[1] = next end
return out
