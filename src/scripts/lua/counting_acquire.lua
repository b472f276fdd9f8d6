-- Acquire permits of a counting semaphore (Redisson's RSemaphore layout: the counter alone).
-- KEYS[1] the counter, KEYS[2] this acquisition's marker {name}:dlock_taken:<owner>.
-- ARGV[1] permits, ARGV[2] how long the marker lasts (ms).
-- The marker makes the attempt idempotent and undoable: a resend finds it and takes nothing
-- more, and a give-back (semaphore_update.lua `undo`) returns the permits only if it is there.
-- Returns {0, 0} when taken (now or by an earlier send), {1, -1} when too few are available.
-- dlock:include permits
if redis.call('exists', KEYS[2]) == 1 then return {0, 0} end
local available, bad = permits_of(KEYS[1])
if not available then return bad end
if available < tonumber(ARGV[1]) then return {1, -1} end
redis.call('decrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[1], 'px', ARGV[2])
return {0, 0}
