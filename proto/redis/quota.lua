-- quota: a token's count of held leases as a call of its own, for Redis
-- Cluster, where the count (in the token's slot) and the lock (in its own)
-- cannot meet in one script. (Embedded after leases.lua, whose functions
-- these are.) On one Redis or under Sentinel the lock scripts keep the
-- count themselves and this script is not used.
-- KEYS[1] = P{/token/NAME}:leases; ARGV[1] = "take", "touch" or "drop";
-- ARGV[2] = lock name; ARGV[3] = ttl in ms (take, touch);
-- ARGV[4] = max_leases (take).
--
-- take:  before the grant is tried: counts the lock in if the token is under
--        its limit. Returns 1 when added, 2 when the lock was counted
--        already, 0 when the token is at its limit. Taking before the grant
--        means concurrent acquires (on any picketd) never overshoot.
-- touch: after a renew. Returns 1.
-- drop:  after a release, or a take whose grant failed. Returns 1.
local now = leases_now()
local op = ARGV[1]
if op == 'drop' then
  leases_drop(KEYS[1], ARGV[2])
  return 1
end
if op == 'touch' then
  leases_touch(KEYS[1], ARGV[2], tonumber(ARGV[3]), now)
  return 1
end
local room = leases_room(KEYS[1], ARGV[2], tonumber(ARGV[4]), now)
if room ~= 0 then leases_add(KEYS[1], ARGV[2], tonumber(ARGV[3]), now) end
return room
