-- Release one read hold of a read-write lock (Redisson's RReadWriteLock layout).
-- KEYS[1] the hash. ARGV[1] Redisson's channel redisson_rwlock:{name}, ARGV[2] owner, ARGV[3]
-- the hold count the caller has now, ARGV[4] its hold keys' prefix (read_acquire.lua), ARGV[5]
-- '{name}' (or the name, when it has a tag): every owner's hold keys are
-- ARGV[5]:<owner>:rwlock_timeout:<n>, ARGV[6] '1' in a Redis Cluster (SPUBLISH), ARGV[7] lease
-- ms (set again on the owner's remaining holds when some remain).
-- Returns nil when the owner does not hold the count the caller expects, 0 when holds of this
-- owner remain, 1 when this owner's last hold went, -1 when the count is already ARGV[3] - 1
-- (a resend that was applied). While other holds remain the hash lasts as long as the longest
-- of their keys; when none is left (only `mode`, or readers whose keys expired: they died) the
-- hash goes and `0` is published, as Redisson's read unlock does.
local field = redis.call('hget', KEYS[1], ARGV[2])
if not field then return nil end
local held, have = tonumber(field), tonumber(ARGV[3])
if not held or held < have - 1 then return nil end
if held == have - 1 then return -1 end
redis.call('del', ARGV[4] .. have)
if have > 1 then
  redis.call('hset', KEYS[1], ARGV[2], tostring(have - 1))
  -- The holds that remain get the lease again, as a mutex's partial release sets it.
  for k = 1, math.min(have - 1, 1000) do redis.call('pexpire', ARGV[4] .. k, ARGV[7]) end
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[7]) then redis.call('pexpire', KEYS[1], ARGV[7]) end
else
  redis.call('hdel', KEYS[1], ARGV[2])
end
local result = have > 1 and 0 or 1
local mode = redis.call('hget', KEYS[1], 'mode')
-- The owner's write hold remains (its read holds came from a downgrade): the hash lasts as its
-- lease says, never shortened to the read holds' keys.
if mode == 'write' and redis.call('hlen', KEYS[1]) > 1 then return result end
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  local fields = redis.call('hkeys', KEYS[1])
  for _, f in ipairs(fields) do
    local n = tonumber(redis.call('hget', KEYS[1], f))
    if f ~= 'mode' and n then
      for i = 1, math.min(n, 1000) do
        longest = math.max(longest, redis.call('pttl', ARGV[5] .. ':' .. f .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return result
  end
end
redis.call('del', KEYS[1])
if ARGV[6] == '1' then
  redis.pcall('spublish', ARGV[1], '0')
else
  redis.pcall('publish', ARGV[1], '0')
end
return result
