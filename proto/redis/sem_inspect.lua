#!lua flags=no-writes
-- sem_inspect: what anyone may know about a semaphore (semaphore.lua has
-- the layout). Never returns a lease id.
-- KEYS[1] = P{NAME}:sem. ARGV[1] = at most this many permits listed.
-- Returns {limit (0: no live permit), live permits, then per listed permit
-- (lowest slot first): slot, fence (a decimal string), owner, ttl ms left
-- (0 while its lock-delay runs), lock-delay ms left}.
local base = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', base .. ':held', '(' .. now, '+inf')
local slots = {}
for _, s in ipairs(live) do slots[#slots + 1] = tonumber(s) end
table.sort(slots)
local out = {tonumber(redis.call('HGET', base, 'limit') or '0') or 0, #slots}
if #slots == 0 then out[1] = 0 end
for k = 1, math.min(#slots, tonumber(ARGV[1])) do
  local lk = base .. ':' .. slots[k] .. ':lease'
  local h = redis.call('HMGET', lk, 'fence', 'owner', 'exp')
  if h[1] then
    local pttl = redis.call('PTTL', lk)
    local ttl, delay = pttl, 0
    if h[3] then
      ttl = tonumber(h[3]) - now
      if ttl <= 0 then ttl, delay = 0, pttl end
    end
    for _, v in ipairs({slots[k], h[1], h[2] or '', math.max(ttl, 0), delay}) do
      out[#out + 1] = v
    end
  end
end
return out
