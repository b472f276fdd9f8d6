-- Release one write hold of a read-write lock (Redisson's RReadWriteLock layout), or leave the
-- waiting writers.
-- KEYS[1] the hash, KEYS[2] dlock's waiting writers. ARGV[1] Redisson's channel
-- redisson_rwlock:{name}, ARGV[2] the writer's field `<owner>:write`, ARGV[3] the hold count the
-- caller has now, ARGV[4] lease ms (kept when holds remain), ARGV[5] owner, ARGV[6] '1' when the
-- caller also leaves the waiting writers (a writer giving up), ARGV[7] '1' in a Redis Cluster.
-- Returns as read_release.lua. The last write hold deletes the hash when only `mode` is left,
-- or else hands it to the owner's read holds (mode=read: a downgrade); either way `1` is
-- published, which wakes every waiter (Redisson publishes only when it deletes the hash, so its
-- readers wait out the lease after a downgrade). A writer leaving the waiting writers last also
-- publishes `1`: readers held back by it may go.
-- dlock:include holds
local function publish(message)
  if ARGV[7] == '1' then return redis.pcall('spublish', ARGV[1], message) end
  return redis.pcall('publish', ARGV[1], message)
end
if ARGV[6] == '1' and redis.call('zrem', KEYS[2], ARGV[5]) == 1 then
  redis.call('zremrangebyscore', KEYS[2], '-inf', time_ms(redis.call('time')))  -- dead writers
  if redis.call('zcard', KEYS[2]) == 0 then publish('1') end
end
local field = redis.call('hget', KEYS[1], ARGV[2])
if not field then return nil end
local held, have = tonumber(field), tonumber(ARGV[3])
if not held or held < have - 1 then return nil end
if held == have - 1 then return -1 end
if have > 1 then
  redis.call('hset', KEYS[1], ARGV[2], tostring(have - 1))
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[4]) then redis.call('pexpire', KEYS[1], ARGV[4]) end
  return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) <= 1 then
  redis.call('del', KEYS[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
publish('1')
return 1
