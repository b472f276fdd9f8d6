-- One check of a count-down latch (Redisson's RCountDownLatch layout: the counter alone; absent
-- reads as 0). KEYS[1] the counter.
-- Returns {0, 0} when the count is 0 or less (open), else {1, ms}: the counter's PTTL when it
-- expires (it opens then), -1 otherwise (wait for `0` on the latch's channel).
local text = redis.call('get', KEYS[1])
if not text then return {0, 0} end
local count = tonumber(text)
if not count then return redis.error_reply('ERR latch ' .. KEYS[1] .. ' is not a count') end
if count <= 0 then return {0, 0} end
return {1, math.max(redis.call('pttl', KEYS[1]), -1)}
