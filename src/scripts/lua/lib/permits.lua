-- Semaphores (Redisson's RSemaphore and RPermitExpirableSemaphore layouts): the counter of
-- available permits, the sorted set of leased permit ids -> deadline (server ms for dlock,
-- client ms for Redisson, 922337203685477 for a Redisson permit that never expires), and the
-- channel redisson_sc:{name}, on which every change that frees permits publishes the new count
-- (Redisson wakes that many of its waiters).
local function publish_count(channel, sharded, value)
  if sharded then
    redis.call('spublish', channel, value)
  else
    redis.call('publish', channel, value)
  end
end

-- The counter's value (0 when absent); an error reply when it is not a number.
local function permits_of(counter)
  local text = redis.call('get', counter)
  if not text then return 0 end
  local n = tonumber(text)
  if not n then
    return nil, redis.error_reply('ERR semaphore ' .. counter .. ' is not a permit count')
  end
  return n
end

-- Permits whose lease ended by `now` go back to the counter (at most 1000 per call, so that a
-- call stays short; the next call takes the rest).
local function reclaim(counter, timeouts, channel, sharded, now)
  local expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, 1000)
  if #expired == 0 then return end
  redis.call('zrem', timeouts, unpack(expired))
  local value = redis.call('incrby', counter, #expired)
  if value > 0 then publish_count(channel, sharded, value) end
end

-- The permit ids packed in one argument (16 raw bytes each, as Redisson stores them).
local function permit_ids(packed)
  local ids = {}
  for at = 1, #packed, 16 do ids[#ids + 1] = string.sub(packed, at, at + 15) end
  return ids
end
