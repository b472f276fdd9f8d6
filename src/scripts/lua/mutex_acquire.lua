-- Acquire or re-enter a reentrant lock in Redisson's RLock layout, and issue a fencing token.
-- KEYS[1] lock hash (the lock's name), KEYS[2] fencing counter redisson_lock_token:{name},
-- KEYS[3] waiter queue dlock_lock_waiters:{name}
-- ARGV[1] lease in ms, ARGV[2] owner field <client-uuid>:<thread-or-lease>,
-- ARGV[3] the hold count the caller has now (0 for a first acquisition),
-- ARGV[4] the caller's waiter ticket ('' or absent: it will not wait),
-- ARGV[5] how long its queue entry stays valid without a new attempt, in ms
-- (KEYS[3], ARGV[4] and ARGV[5] may be left out together: no queue),
-- ARGV[6] '0': issue no fencing token (the counter is not touched; the token is 0)
-- Returns {0, token} when the caller holds the lock (token: the counter, INCRed on a first
-- acquisition only), {pttl} when another owner holds it, or {-1, count} when the owner's field
-- holds a count the caller does not expect (its local view is stale).
-- Idempotent: resent after a lost reply, an acquisition that was applied (count is already
-- ARGV[3] + 1) is reported again instead of counted twice.
-- Layout as Redisson: hash field owner -> hold count, PEXPIRE lease on the hash. A key of
-- another type fails with WRONGTYPE (HGET), never reads as "held".
-- The waiter queue (a dlock addition, invisible to Redisson): a caller that finds the lock held
-- and will wait is entered with score = server time + ARGV[5], so that an unlock can name
-- exactly one waiter to wake (mutex_release.lua); it leaves the queue when it acquires.
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
local have = tonumber(ARGV[3])
local ticket = (KEYS[3] and ARGV[4]) or ''
local fenced = ARGV[6] ~= '0'
local token
if held == have + 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])  -- trusted from this send: the lease must start now
  token = fenced and tonumber(redis.call('get', KEYS[2]) or '0') or 0
elseif held ~= have then
  return {-1, held}
elseif have == 0 and redis.call('exists', KEYS[1]) == 1 then
  if ticket ~= '' then
    local now = redis.call('time')
    local ttl = tonumber(ARGV[5])
    redis.call('zadd', KEYS[3], now[1] * 1000 + math.floor(now[2] / 1000) + ttl, ticket)
    if redis.call('pttl', KEYS[3]) < ttl then
      redis.call('pexpire', KEYS[3], ttl)
    end
  end
  return {redis.call('pttl', KEYS[1])}
else
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if not fenced then
    token = 0
  elseif have == 0 then
    token = redis.call('incr', KEYS[2])
  else
    token = tonumber(redis.call('get', KEYS[2]) or '0')
  end
end
if ticket ~= '' then
  redis.call('zrem', KEYS[3], ticket)
end
return {0, token}
