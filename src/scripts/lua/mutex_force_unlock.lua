-- Delete a lock whoever holds it and wake the waiters' processes (Redisson RLock.forceUnlock).
-- KEYS[1] lock hash; ARGV[1] Redisson's channel of the lock, ARGV[2] '1' in a Redis Cluster
-- (SPUBLISH, as mutex_release.lua).
-- Returns 1 if the lock existed, 0 if it was free.
if redis.call('del', KEYS[1]) == 1 then
  if ARGV[2] == '1' then
    redis.pcall('spublish', ARGV[1], '0')
  else
    redis.pcall('publish', ARGV[1], '0')
  end
  return 1
end
return 0
