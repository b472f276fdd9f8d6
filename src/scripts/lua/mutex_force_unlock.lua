-- Delete a lock whoever holds it and wake its waiters (Redisson's forceUnlock of RLock,
-- RFairLock and RReadWriteLock).
-- KEYS[1] lock hash; KEYS[2], KEYS[3] (a fair lock only) its queue redisson_lock_queue:{name}
-- and deadlines redisson_lock_timeout:{name}: stale heads are purged first, as Redisson does.
-- ARGV[1] Redisson's channel of the lock, ARGV[2] '1' in a Redis Cluster (SPUBLISH, as
-- mutex_release.lua), ARGV[3] the message (default '0'; '1' for a read-write lock: wakes all).
-- A fair lock's message goes to its queue's head, on ARGV[1] .. ':' .. <head owner>.
-- Returns 1 if the lock existed, 0 if it was free.
-- dlock:include holds
-- dlock:include fair_queue
if redis.call('del', KEYS[1]) == 0 then return 0 end
local channel = ARGV[1]
if KEYS[2] then
  purge_stale_heads(KEYS[2], KEYS[3], time_ms(redis.call('time')), ARGV[1], ARGV[2] == '1')
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then return 1 end
  channel = channel .. ':' .. head
end
if ARGV[2] == '1' then
  redis.pcall('spublish', channel, ARGV[3] or '0')
else
  redis.pcall('publish', channel, ARGV[3] or '0')
end
return 1
