-- quota: one token's count of held leases, for its max_leases (issue 16).
-- KEYS[1] = P{/token/NAME}:leases, a sorted set: member = lock name,
--   score = when that lease expires (ms, Redis TIME). The '/' in the hash
--   tag cannot occur in a lock name, so the key never meets a lock's keys.
-- ARGV[1] = "take", "touch" or "drop"; ARGV[2] = lock name;
-- ARGV[3] = ttl in ms (take, touch); ARGV[4] = max_leases (take).
--
-- take:  forgets leases past their expiry, then counts the lock in if the
--        token is under its limit. Returns 1 when added, 2 when the lock
--        was counted already (a same-lease retry, or a second lease of the
--        token on a lock it holds), 0 when the token is at its limit.
-- touch: moves a counted lock's expiry (renew). Returns 1.
-- drop:  stops counting it (release, or a take whose grant failed).
--        Returns 1.
-- The set expires with its last lease, so an idle token leaves no key.
-- It is a count kept beside the locks, not in their script: a token's
-- leases live on many locks, which under Redis Cluster sit in other slots.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
if op == 'drop' then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
local expiry = now + tonumber(ARGV[3])
local function keep()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', KEYS[1], math.max(tonumber(last[2]), expiry)) end
end
if op == 'touch' then
  redis.call('ZADD', KEYS[1], 'XX', 'GT', expiry, ARGV[2])
  keep()
  return 1
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'GT', expiry, ARGV[2])
  keep()
  return 2
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], expiry, ARGV[2])
keep()
return 1
