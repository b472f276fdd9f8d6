-- Delete a lock whoever holds it and wake one waiter (Redisson RLock.forceUnlock).
-- KEYS[1] lock hash, KEYS[2] channel; ARGV[1] unlock message
-- Returns 1 if the lock existed, 0 if it was free.
if redis.call('del', KEYS[1]) == 1 then
  redis.pcall('publish', KEYS[2], ARGV[1])  -- see mutex_release.lua
  return 1
end
return 0
