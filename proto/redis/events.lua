-- events.lua: a lock's events (docs/events.md), for GET
-- /v1/locks/{name}/events. Put in front of acquire.lua, renew.lua,
-- release.lua and break.lua, after hold.lua (hold_now).
--
-- An event is published on P{NAME}:events only while P{NAME}:watch exists:
-- picketd keeps that key alive (watch.lua) while it streams the lock's
-- events to anyone, and subscribes to the channel before it sets the key.
-- Every other call pays one EXISTS and publishes nothing, which matters
-- under Redis Cluster, where each classic PUBLISH is broadcast to every
-- node (docs/cluster.md). Both keys derive from the lease key (KEYS[1],
-- "P{NAME}:lease") and share its hash slot.
--
-- The message is "KIND FENCE N TIME TEXT": KIND g (granted, N the TTL
-- given, TEXT the owner), n (renewed, N the TTL), r (released), b (broken,
-- N the fence the break moved to, TEXT who broke it); TIME is Redis TIME
-- in ms. TEXT comes last and may hold spaces.
--
-- The watch key is read with pcall: it is not among the script's declared
-- keys (the callers' KEYS stay as they are), and while its hash slot
-- migrates Redis Cluster refuses access to an undeclared key that is not
-- on this node. Then the event is not published (the call itself goes on:
-- an event is never worth failing a grant), and a stream may miss it.
local function events_emit(lk, kind, fence, n, text)
  local base = lk:sub(1, -6)
  local watched = redis.pcall('EXISTS', base .. 'watch')
  if type(watched) ~= 'number' or watched == 0 then return end
  redis.call('PUBLISH', base .. 'events',
             kind .. ' ' .. fence .. ' ' .. n .. ' ' .. hold_now() .. ' ' .. (text or ''))
end
