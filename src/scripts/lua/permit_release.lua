-- Release the permits of one acquisition of a leased semaphore (permit_acquire.lua), or give
-- back what an abandoned attempt may have taken.
-- KEYS[1] the counter, KEYS[2] the sorted set of leased permits. ARGV[1] the permits' ids (16
-- raw bytes each), ARGV[2] the channel redisson_sc:{name}, ARGV[3] '1' in a Redis Cluster.
-- Each id still leased goes back to the counter, once: an id already reclaimed (its lease ended)
-- is never counted twice. Returns 1 when every id was leased and within its lease; nil when
-- any was gone or past its deadline (the lease was lost; whatever was still there went back).
-- dlock:include holds
-- dlock:include permits
local now = time_ms(redis.call('time'))
local sharded = ARGV[3] == '1'
local ids = permit_ids(ARGV[1])
local back, late = 0, false
for _, id in ipairs(ids) do
  local deadline = redis.call('zscore', KEYS[2], id)
  if deadline then
    redis.call('zrem', KEYS[2], id)
    back = back + 1
    if tonumber(deadline) <= now then late = true end
  end
end
if back > 0 then publish_count(ARGV[2], sharded, redis.call('incrby', KEYS[1], back)) end
reclaim(KEYS[1], KEYS[2], ARGV[2], sharded, now)
if late or back < #ids then return nil end
return 1
