-- counter.lua: what a fence counter may hold, and its guard against other
-- writers. Not a script of its own: proto/CMakeLists.txt puts it in front
-- of acquire.lua, renew.lua and release.lua when they are embedded, so the
-- three share one definition (its locals are theirs).
--
-- Why a guard: on a Redis shared with other writers (or an operator with
-- redis-cli) anyone may set P{NAME}:fence to 0, to -10, to text, or delete
-- it. Fences are only as good as that counter, so every script that
-- touches a lock checks it first. While a grant is live its fence is the
-- last fence issued (a lock is granted only while no grant is live), so a
-- counter below it, missing, or not a count is *tampered*, and the guard
-- repairs it: it sets the counter to the live grant's fence before the
-- script writes anything else, in the same atomic script. The next grant is
-- then above every fence picketd knows of. The caller reports the repair
-- (picket_fence_tampered_total, one log line).
local MAX = '9223372036854775807' -- 2^63-1

-- a > b, for decimal strings without sign or leading zeros
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

-- s is a count 0..2^63-1 in decimal, without sign, spaces or leading zeros
local function is_count(s)
  return s == '0' or (string.match(s, '^[1-9]%d*$') ~= nil and not greater(s, MAX))
end

-- Reads the counter (KEYS[2]) and the live grant (KEYS[1]); `idle` is the
-- counter idle TTL in ms ("0": never expires). Returns the counter as
-- stored (nil when missing), the live grant's lease id and fence (nil, nil
-- when no grant is live), and "" or why the counter was repaired:
-- "missing", "below" or "invalid". Raises PICKET_TAMPERED (nothing
-- written) when the live grant's own fence is not a count from 1: then no
-- fence is certain. A key of the wrong type raises WRONGTYPE, as before.
-- The lease's lock-delay and hold cap fields (hold.lua), as guard read them:
-- numbers, or nil when the lease has none (or there is no lease).
local hold = {}

local function guard(idle, lk, fk)
  lk, fk = lk or KEYS[1], fk or KEYS[2]
  local last = redis.call('GET', fk)
  local h = redis.call('HMGET', lk, 'lease', 'fence', 'exp', 'delay', 'cap', 'ttl')
  local lease, live = h[1], h[2]
  hold.exp = h[3] and tonumber(h[3]) or nil
  hold.delay = h[4] and tonumber(h[4]) or nil
  hold.cap = h[5] and tonumber(h[5]) or nil
  hold.ttl = h[6] and tonumber(h[6]) or nil
  if not lease then return last, nil, nil, '' end
  if not (live and live ~= '0' and is_count(live)) then
    error(redis.error_reply('PICKET_TAMPERED the live grant ' .. lk ..
      ' holds no valid fence; another writer changed it'))
  end
  local why = ''
  if not last then why = 'missing'
  elseif not is_count(last) then why = 'invalid'
  elseif greater(live, last) then why = 'below'
  else return last, lease, live, '' end
  -- Raise it to the live fence. With an idle TTL the counter must still
  -- outlive the grant it counts (acquire.lua's rule).
  local px = tonumber(idle)
  if px > 0 then
    redis.call('SET', fk, live, 'PX', math.max(px, redis.call('PTTL', lk)))
  else
    redis.call('SET', fk, live)
  end
  return live, lease, live, why
end

-- s + 1, for a decimal string below MAX
local function succ(s)
  local i = #s
  while i > 0 and s:byte(i) == 57 do i = i - 1 end -- 57 is '9'
  if i == 0 then return '1' .. string.rep('0', #s) end
  return s:sub(1, i - 1) .. string.char(s:byte(i) + 1) .. string.rep('0', #s - i)
end

-- The next fence after the counter `last` of fence key fk (nil: lost,
-- counts as 0): last + 1, or with floor "clock" the larger of that and
-- Redis TIME in microseconds (t: a TIME reply already read, or nil).
-- Returns the fence and "" or why the counter could not be used
-- ("invalid"). Raises PICKET_TAMPERED (with --fence-floor none a counter
-- that is not a count leaves no next fence certain) and PICKET_COUNTER (at
-- 2^63-1); call it before the first write.
local function fence_next(last, fk, floor, t)
  local why = ''
  last = last or '0'
  if not is_count(last) then
    if floor ~= 'clock' then
      error(redis.error_reply('PICKET_TAMPERED the fence counter ' .. fk ..
        ' is not a count (another writer changed it); with --fence-floor none no next fence' ..
        ' is certain: set it to the highest fence storage has seen'))
    end
    last, why = '0', 'invalid'
  end
  if last == MAX then
    error(redis.error_reply('PICKET_COUNTER the fence counter ' .. fk ..
      ' is at 2^63-1: this lock has no fence left'))
  end
  local fence = succ(last)
  if floor == 'clock' then
    t = t or redis.call('TIME')
    local now = t[1] .. string.format('%06d', tonumber(t[2]))
    if greater(now, fence) then fence = now end
  end
  return fence, why
end

