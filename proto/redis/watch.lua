-- watch: keeps a lock's events published while picketd streams them
-- (events.lua). KEYS[1] = P{NAME}:lease; ARGV[1] = for how long (ms): the
-- key P{NAME}:watch lives that long unless picketd sets it again, so a
-- picketd that stops or dies costs the publishing scripts at most that
-- much more. Returns 1.
redis.call('SET', KEYS[1]:sub(1, -6) .. 'watch', '1', 'PX', ARGV[1])
return 1
