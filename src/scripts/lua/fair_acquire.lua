-- Acquire or re-enter a fair lock in Redisson's RFairLock layout, issuing a fencing token.
-- KEYS[1] lock hash, KEYS[2] queue redisson_lock_queue:{name}, KEYS[3] deadlines
-- redisson_lock_timeout:{name}, KEYS[4] the slot's fencing counter and KEYS[5] RFencedLock's
-- counter of the name (both absent: fencing off, token 0).
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] the hold count the caller has now (0: a first
-- acquisition), ARGV[4] '1' when the caller waits (it queues when it cannot take the lock; '0':
-- a single try, which never queues, as Redisson's tryLock()), ARGV[5] how long its queue entry
-- stays valid without a new attempt (ms, from the server's TIME), ARGV[6] Redisson's channel
-- redisson_lock__channel:{name} (a purged waiter hears `0` on it plus ':' and its owner), ARGV[7]
-- '1' in a Redis Cluster (SPUBLISH).
-- Returns {0, token} when the caller holds the lock (token 0 for a re-entry), {1, ms} when it
-- must wait (the lock's PTTL, or until the head's deadline when the lock is free but not its
-- turn), {3, count} when its field holds fewer holds than it expects (its hold was lost), {5, 0}
-- when the hash is a read-write lock's (it has `mode`).
-- Idempotent as mutex_acquire.lua: a resend whose first send was applied finds its count plus one.
-- dlock:include fencing
-- dlock:include holds
-- dlock:include fair_queue
local have = tonumber(ARGV[3])
local now = redis.call('time')
local now_ms = time_ms(now)
purge_stale_heads(KEYS[2], KEYS[3], now_ms, ARGV[6], ARGV[7] == '1')
local exists = redis.call('exists', KEYS[1]) == 1
local held = 0
if exists then
  if redis.call('hexists', KEYS[1], 'mode') == 1 then return {5, 0} end
  local bad
  held, bad = hold_count(KEYS[1], ARGV[2])
  if not held then return bad end
end
if held < have then return {3, held} end
if held > have then
  -- Applied before (a resend): the caller's count is have + 1 from now on.
  if held ~= have + 1 then redis.call('hset', KEYS[1], ARGV[2], tostring(have + 1)) end
  redis.call('pexpire', KEYS[1], ARGV[1])
  if have > 0 then return {0, 0} end
elseif have > 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {0, 0}
else
  local head = redis.call('lindex', KEYS[2], 0)
  if exists or (head and head ~= ARGV[2]) then
    if ARGV[4] == '1' then
      local deadline = now_ms + tonumber(ARGV[5])
      local score = tonumber(redis.call('zscore', KEYS[3], ARGV[2]))
      if not score then
        -- Behind a Redisson waiter (a deadline further ahead than any of dlock's), chain on
        -- it as Redisson does: each Redisson acquisition ahead subtracts its wait from every
        -- deadline, and an entry that did not add one would be pushed into the past — and so
        -- would the Redisson waiters that queue behind it and chain on it.
        local tail = redis.call('lindex', KEYS[2], -1)
        local tail_deadline = tail and tonumber(redis.call('zscore', KEYS[3], tail))
        if tail_deadline and tail_deadline > deadline then
          deadline = tail_deadline + tonumber(ARGV[5])
        end
        redis.call('zadd', KEYS[3], deadline, ARGV[2])
        redis.call('rpush', KEYS[2], ARGV[2])
      elseif score < deadline then
        redis.call('zadd', KEYS[3], deadline, ARGV[2])
      end
    end
    if exists then return {1, redis.call('pttl', KEYS[1])} end
    local head_deadline = tonumber(redis.call('zscore', KEYS[3], head)) or now_ms
    return {1, math.max(head_deadline - now_ms, 0)}
  end
end
-- A first acquisition (or its resend). Nothing is written before the counter is known usable.
local last, other_exists = 0, false
if KEYS[4] then
  last, other_exists = fencing_read(KEYS[4], KEYS[5])
  if not last then return other_exists end
end
if held == 0 then
  if redis.call('lindex', KEYS[2], 0) == ARGV[2] then redis.call('lpop', KEYS[2]) end
  redis.call('zrem', KEYS[3], ARGV[2])
  redis.call('hset', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
end
local token = 0
if KEYS[4] then
  local bad
  token, bad = fencing_issue(KEYS[4], KEYS[5], last, other_exists, now)
  if not token then return bad end
end
return {0, token}
