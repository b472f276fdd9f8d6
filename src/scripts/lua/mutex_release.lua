-- Release one hold of a Redisson RLock-compatible reentrant lock.
-- KEYS[1] lock hash, KEYS[2] channel redisson_lock__channel:{name}
-- ARGV[1] unlock message ('0'), ARGV[2] lease in ms, ARGV[3] owner field
-- Returns nil when ARGV[3] does not hold the lock (nothing changes), 0 when the hold count went
-- down but the lock is still held (lease renewed), 1 when the lock was released (key deleted and
-- ARGV[1] published so that one waiter wakes).
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
