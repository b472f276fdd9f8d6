-- Raise a slot's fencing counter to at least a token (red_lock: its token, the largest of its
-- quorum's, written back to every member so that any later quorum issues a larger one).
-- KEYS[1] the slot's fencing counter, KEYS[2] RFencedLock's counter of the name (advanced too
-- if it exists, never created). ARGV[1] the token.
-- Returns 1 (the counters are at least the token now), or the counter's error.
-- dlock:include fencing
local last, other_exists = fencing_read(KEYS[1], KEYS[2])
if not last then return other_exists end
local floor = tonumber(ARGV[1])
if last < floor then
  local done = redis.pcall('set', KEYS[1], ARGV[1])
  if type(done) == 'table' and done.err then return done end
  if other_exists then
    done = redis.pcall('set', KEYS[2], ARGV[1])
    if type(done) == 'table' and done.err then return done end
  end
end
return 1
