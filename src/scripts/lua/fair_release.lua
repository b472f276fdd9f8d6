-- Release one hold of a fair lock (Redisson's RFairLock layout), or leave its queue.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] deadlines (as fair_acquire.lua).
-- ARGV[1] Redisson's channel redisson_lock__channel:{name} (the head's is it plus ':' and its
-- owner), ARGV[2] owner, ARGV[3] the hold count the caller has now, ARGV[4] lease ms (set again
-- when holds remain), ARGV[5] '1' when the caller also leaves the queue (a waiter giving up),
-- ARGV[6] '1' in a Redis Cluster (SPUBLISH, as Redisson's on Redis >= 7 clusters).
-- Returns nil when the owner does not hold the count the caller expects (nothing released), 0
-- when holds remain (lease reset), 1 when the lock was freed, -1 when the count is already
-- ARGV[3] - 1 (a resend that was applied). Whenever the lock is free afterwards, the queue's
-- head (after purging stale ones) hears `0` on its own channel, as Redisson's unlock does.
-- dlock:include holds
-- dlock:include fair_queue
purge_stale_heads(KEYS[2], KEYS[3], time_ms(redis.call('time')), ARGV[1], ARGV[6] == '1')
if ARGV[5] == '1' then
  redis.call('lrem', KEYS[2], 0, ARGV[2])
  redis.call('zrem', KEYS[3], ARGV[2])
end
local function notify_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then return end
  local channel = ARGV[1] .. ':' .. head
  if ARGV[6] == '1' then
    redis.pcall('spublish', channel, '0')
  else
    redis.pcall('publish', channel, '0')
  end
end
local field = redis.call('hget', KEYS[1], ARGV[2])
if not field then
  if redis.call('exists', KEYS[1]) == 0 then notify_head() end
  return nil
end
local held, have = tonumber(field), tonumber(ARGV[3])
if not held or held < have - 1 then return nil end
if held == have - 1 then return -1 end
if have > 1 then
  redis.call('hset', KEYS[1], ARGV[2], tostring(have - 1))
  redis.call('pexpire', KEYS[1], ARGV[4])
  return 0
end
redis.call('del', KEYS[1])
notify_head()
return 1
