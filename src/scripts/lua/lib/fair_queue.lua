-- RFairLock's queue (the list KEYS[2] of owners in arrival order) and their deadlines (the
-- sorted set KEYS[3]): heads whose deadline has passed are gone, as Redisson purges them. A head
-- with no deadline at all is purged too (Redisson's script would fail on it).
local function purge_stale_heads(queue, timeouts, now_ms)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then return end
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > now_ms then return end
    redis.call('zrem', timeouts, head)
    redis.call('lpop', queue)
  end
end
