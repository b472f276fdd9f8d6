-- Acquire permits of a leased semaphore (Redisson's RPermitExpirableSemaphore layout).
-- KEYS[1] the counter of available permits, KEYS[2] the sorted set {name}:timeout of leased
-- permit ids -> deadline. ARGV[1] lease ms, ARGV[2] the new permits' ids (16 raw bytes each),
-- ARGV[3] the channel redisson_sc:{name}, ARGV[4] '1' in a Redis Cluster (SPUBLISH).
-- Permits whose deadline passed (server TIME) are reclaimed first. A resend of an attempt that
-- was applied finds its ids: all of them get the deadline now + lease again (the caller trusts
-- the permits from the resend's send time); some of them only (the rest were reclaimed): those
-- go back and the attempt starts over. Returns {0, 0} when the permits were taken (now or by
-- an earlier send), with deadline now + lease;
-- {1, ms} when too few are available: ms until the nearest leased permit's deadline, or -1
-- when none will end by itself (wait for a release).
-- dlock:include holds
-- dlock:include permits
local now = time_ms(redis.call('time'))
local sharded = ARGV[4] == '1'
reclaim(KEYS[1], KEYS[2], ARGV[3], sharded, now)
local ids = permit_ids(ARGV[2])
local deadline = now + tonumber(ARGV[1])
local present = {}
for _, id in ipairs(ids) do
  if redis.call('zscore', KEYS[2], id) then present[#present + 1] = id end
end
if #present == #ids then
  for _, id in ipairs(ids) do redis.call('zadd', KEYS[2], 'xx', deadline, id) end
  return {0, 0}
end
if #present > 0 then
  redis.call('zrem', KEYS[2], unpack(present))
  publish_count(ARGV[3], sharded, redis.call('incrby', KEYS[1], #present))
end
local available, bad = permits_of(KEYS[1])
if not available then return bad end
if available >= #ids then
  redis.call('decrby', KEYS[1], #ids)
  for _, id in ipairs(ids) do redis.call('zadd', KEYS[2], deadline, id) end
  -- As Redisson does: the leases live no longer than a counter that expires.
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return {0, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] and tonumber(first[2]) < 922337203685477 then
  return {1, math.max(tonumber(first[2]) - now, 0)}
end
return {1, -1}
