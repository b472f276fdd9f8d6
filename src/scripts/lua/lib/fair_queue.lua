-- RFairLock's queue (the list KEYS[2] of owners in arrival order) and their deadlines (the
-- sorted set KEYS[3]): heads whose deadline has passed are gone, as Redisson purges them. A head
-- with no deadline at all is purged too (Redisson's script would fail on it). Each purged owner
-- hears `0` on its own channel (`channel` .. ':' .. owner; SPUBLISH when `sharded`): a waiter
-- that is alive after all — a Redisson waiter whose deadline Redisson's own acquisitions pushed
-- into the past behind a dlock waiter's short one — tries again at once and queues anew,
-- instead of sleeping until the lock's lease ends. Redisson's purge tells no one.
local function purge_stale_heads(queue, timeouts, now_ms, channel, sharded)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then return end
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > now_ms then return end
    redis.call('zrem', timeouts, head)
    redis.call('lpop', queue)
    if channel and sharded then
      redis.pcall('spublish', channel .. ':' .. head, '0')
    elseif channel then
      redis.pcall('publish', channel .. ':' .. head, '0')
    end
  end
end
