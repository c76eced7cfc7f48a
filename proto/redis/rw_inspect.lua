#!lua flags=no-writes
-- rw_inspect: what anyone may know about a read/write lock (rwlock.lua has
-- the layout). Never returns a lease id.
-- KEYS[1] = P{NAME}:rw. ARGV[1] = at most this many readers listed.
-- Returns {last fence issued ("0": never), writer {fence, owner, ttl ms,
-- lock-delay ms} or {} , live readers, waiting writers, then per listed
-- reader: fence, owner, ttl ms}. While a write lease's lock-delay runs its
-- ttl is 0 and the delay what is left of it.
local base = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = redis.call('GET', base .. ':fence') or '0'
local writer = {}
local w = redis.call('HMGET', base .. ':w', 'lease', 'fence', 'owner', 'exp')
if w[1] then
  local pttl = redis.call('PTTL', base .. ':w')
  local ttl, delay = pttl, 0
  if w[4] then
    ttl = tonumber(w[4]) - now
    if ttl <= 0 then ttl, delay = 0, pttl end
  end
  writer = {w[2], w[3] or '', math.max(ttl, 0), delay}
  last = w[2]
end
local live = redis.call('ZRANGEBYSCORE', base .. ':r', '(' .. now, '+inf')
local waiting = redis.call('ZCOUNT', base .. ':ww', '(' .. now, '+inf')
local out = {last, writer, #live, waiting}
for k = 1, math.min(#live, tonumber(ARGV[1])) do
  local rk = base .. ':r:' .. live[k]
  local h = redis.call('HMGET', rk, 'fence', 'owner')
  if h[1] then
    for _, v in ipairs({h[1], h[2] or '', math.max(redis.call('PTTL', rk), 0)}) do
      out[#out + 1] = v
    end
  end
end
return out
