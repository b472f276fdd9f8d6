-- Release one hold of a reentrant lock in Redisson's RLock layout.
-- KEYS[1] lock hash, KEYS[2] channel redisson_lock__channel:{name}
-- ARGV[1] unlock message ('0': wake one waiter), ARGV[2] lease in ms, ARGV[3] owner field,
-- ARGV[4] the hold count the caller has now
-- Returns nil when ARGV[3] does not hold the lock (nothing changes), 0 when the count went down
-- and the lock is still held (lease reset to ARGV[2]), 1 when the lock was released (key
-- deleted, ARGV[1] published), -1 when the count is already ARGV[4] - 1: a resent release that
-- was applied, so it is not applied twice.
local held = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
if held == 0 then
  return nil
end
if held == tonumber(ARGV[4]) - 1 then
  return -1
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
-- pcall: an ACL user without channel rights (Redis 7's default) may not publish; the lock is
-- released all the same and waiters find out by their re-checks.
redis.pcall('publish', KEYS[2], ARGV[1])
return 1
