-- Release one hold of a reentrant lock in Redisson's RLock layout, and hand a free lock on.
-- KEYS[1] lock hash, KEYS[2] waiter queue, KEYS[3] waiter records, KEYS[4] yield marker,
-- KEYS[5] and KEYS[6] the fencing counters as in mutex_acquire.lua (absent: fencing off).
-- ARGV[1] Redisson's channel redisson_lock__channel:{name}, ARGV[2] dlock's channel of the name
-- (keys::dlock_channel; a client's waiter channel is it plus ':' and the client id), ARGV[3]
-- owner field, ARGV[4] the hold count the caller has now, ARGV[5] lease ms (set again when holds
-- remain), ARGV[6] a waiter ticket that leaves the queue ('': none), ARGV[7] how long a free lock
-- is left to Redisson's waiters (ms), ARGV[8] '1' in a Redis Cluster: the channels are shard
-- channels (SPUBLISH, PUBSUB SHARDNUMSUB), as Redisson's on Redis >= 7 clusters.
-- A waiter that gives up sends its expected count plus one and its ticket: an acquisition that
-- was applied, or handed to it, is released, and it leaves the queue.
-- Returns nil when the owner does not hold the count the caller expects (nothing changes), 0
-- when holds remain (lease reset), 1 when the lock was freed or handed on, -1 when the count is
-- already ARGV[4] - 1 (a resend that was applied).
-- Hand-off: the queue's longest-waiting live dlock waiter gets the lock outright — its owner
-- field at 1, its own lease, a fencing token kept in its record — and its client is told on its
-- waiter channel; if its client is not subscribed there (the process died), the next one is
-- tried. When Redisson
-- processes wait too (NUMSUB of Redisson's channel above that of dlock's, to which every dlock
-- waiter subscribes), the lock is left free to them instead: the yield marker keeps dlock
-- attempts off it for ARGV[7] ms, `y` on dlock's channel tells dlock waiters that the `0` which
-- follows is not theirs.
-- dlock:include fencing
if ARGV[6] ~= '' then
  redis.pcall('zrem', KEYS[2], ARGV[6])
  redis.pcall('hdel', KEYS[3], ARGV[6])
end
local field = redis.call('hget', KEYS[1], ARGV[3])
if not field then return nil end
local held, have = tonumber(field), tonumber(ARGV[4])
if not held or held < have - 1 then return nil end
if held == have - 1 then return -1 end
if have > 1 then
  redis.call('hset', KEYS[1], ARGV[3], tostring(have - 1))
  redis.call('pexpire', KEYS[1], ARGV[5])
  return 0
end
-- The last hold: DEL (over maxmemory with noeviction Redis refuses writes but DEL).
redis.call('del', KEYS[1])
local sharded = ARGV[8] == '1'
local function publish(channel, message)
  if sharded then return redis.pcall('spublish', channel, message) end
  return redis.pcall('publish', channel, message)
end
local function subscribers(...)
  if sharded then return redis.call('pubsub', 'shardnumsub', ...) end
  return redis.call('pubsub', 'numsub', ...)
end
local counts = subscribers(ARGV[1], ARGV[2])
if counts[2] > counts[4] then
  redis.pcall('set', KEYS[4], '1', 'PX', ARGV[7])
  publish(ARGV[2], 'y')
else
  local now, now_ms
  for _ = 1, 16 do  -- bounded: a pile of dead waiters is cleared over several releases
    local head = redis.pcall('zrange', KEYS[2], 0, 0)
    if type(head) ~= 'table' or not head[1] then break end
    if not now then
      now = redis.call('time')
      now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
    end
    local ticket = head[1]
    local record = redis.pcall('hget', KEYS[3], ticket)
    local stale_at, id, owner, lease, fenced = string.match(type(record) == 'string' and record or '',
                                                           '^(%d+) (%S+) (%S+) (%d+) ([01])$')
    if stale_at and fenced == '1' and not KEYS[5] then break end  -- cannot fence it: left free
    redis.pcall('zrem', KEYS[2], ticket)
    redis.pcall('hdel', KEYS[3], ticket)
    if stale_at and tonumber(stale_at) > now_ms then
      local token = 0
      if fenced == '1' then
        local last, other_exists = fencing_read(KEYS[5], KEYS[6])
        token = last and fencing_issue(KEYS[5], KEYS[6], last, other_exists, now)
      end
      if token and type(redis.pcall('hset', KEYS[1], owner, '1')) == 'number' and
         type(redis.pcall('pexpire', KEYS[1], lease)) == 'number' and
         type(redis.pcall('hset', KEYS[3], ticket, 'g ' .. digits(token))) == 'number' then
        -- Only its client's own subscription counts (PUBLISH's count includes pattern
        -- subscribers, which would make a dead waiter look alive).
        -- A PUBLISH refused (no right to the channel) undoes the hand-off as well.
        local channel = ARGV[2] .. ':' .. id
        if subscribers(channel)[2] > 0 and type(publish(channel, ticket)) == 'number' then
          return 1
        end
      end
      redis.call('del', KEYS[1])
      redis.pcall('hdel', KEYS[3], ticket)
    end
  end
end
publish(ARGV[1], '0')
return 1
