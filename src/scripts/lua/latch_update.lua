-- Writes of a count-down latch (Redisson's RCountDownLatch layout).
-- KEYS[1] the counter. ARGV[1] the operation, ARGV[2] a number, ARGV[3] the channel
-- redisson_countdownlatch__channel__{name}, ARGV[4] '1' in a Redis Cluster (SPUBLISH).
-- - `count`: the count (0 when absent);
-- - `set`: sets the count to ARGV[2] if the latch is absent (closed again) and publishes `1`,
--   as Redisson's trySetCount: 1, else 0;
-- - `down`: takes ARGV[2] from the count; at 0 or below the counter goes and `0` (open) is
--   published when the count was above 0 before — also past zero, where Redisson publishes only
--   at exactly 0: the count left (0 when open).
local function publish(message)
  if ARGV[4] == '1' then
    redis.call('spublish', ARGV[3], message)
  else
    redis.call('publish', ARGV[3], message)
  end
end
local text = redis.call('get', KEYS[1])
local count = 0
if text then
  count = tonumber(text)
  if not count then return redis.error_reply('ERR latch ' .. KEYS[1] .. ' is not a count') end
end
if ARGV[1] == 'count' then return count end
if ARGV[1] == 'set' then
  if text then return 0 end
  redis.call('set', KEYS[1], ARGV[2])
  publish('1')
  return 1
end
if ARGV[1] == 'down' then
  if not text then return 0 end  -- open already: nothing to count or announce
  local left = redis.call('decrby', KEYS[1], ARGV[2])  -- keeps the key's expiry
  if left > 0 then return left end
  redis.call('del', KEYS[1])
  if count > 0 then publish('0') end
  return 0
end
return redis.error_reply('ERR unknown latch operation ' .. ARGV[1])
