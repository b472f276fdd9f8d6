-- Acquire or re-enter a Redisson RLock-compatible reentrant lock, and issue a fencing token.
-- KEYS[1] lock hash (the user's lock name), KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease in ms, ARGV[2] owner field <client-uuid>:<thread-or-lease-id>
-- Returns {0, token} when acquired (token = the new counter value on a first acquisition, the
-- current one on re-entry), or {pttl} of the holder when the lock is held by someone else.
-- Layout as Redisson: hash field owner -> hold count, PEXPIRE lease on the hash.
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {0, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {0, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {redis.call('pttl', KEYS[1])}
