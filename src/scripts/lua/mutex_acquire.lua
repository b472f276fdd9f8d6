-- Acquire or re-enter a reentrant lock in Redisson's RLock layout, and issue a fencing token.
-- KEYS[1] lock hash (the lock's name), KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease in ms, ARGV[2] owner field <client-uuid>:<thread-or-lease>,
-- ARGV[3] the hold count the caller has now (0 for a first acquisition)
-- Returns {0, token} when the caller holds the lock (token: the counter, INCRed on a first
-- acquisition only), {pttl} when another owner holds it, or {-1, count} when the owner's field
-- holds a count the caller does not expect (its local view is stale).
-- Idempotent: resent after a lost reply, an acquisition that was applied (count is already
-- ARGV[3] + 1) is reported again instead of counted twice.
-- Layout as Redisson: hash field owner -> hold count, PEXPIRE lease on the hash. A key of
-- another type fails with WRONGTYPE (HGET), never reads as "held".
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
local have = tonumber(ARGV[3])
if held == have + 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])  -- trusted from this send: the lease must start now
  return {0, tonumber(redis.call('get', KEYS[2]) or '0')}
end
if held ~= have then
  return {-1, held}
end
if have == 0 and redis.call('exists', KEYS[1]) == 1 then
  return {redis.call('pttl', KEYS[1])}
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
if have == 0 then
  return {0, redis.call('incr', KEYS[2])}
end
return {0, tonumber(redis.call('get', KEYS[2]) or '0')}
