-- Acquire or re-enter the write side of a read-write lock in Redisson's RReadWriteLock layout,
-- issuing a fencing token for a first acquisition. KEYS as read_acquire.lua.
-- ARGV[1] lease ms, ARGV[2] the writer's field `<owner>:write`, ARGV[3] the hold count the
-- caller has now, ARGV[4] owner (its reader field: an owner holding read holds is refused the
-- write side, which would wait for itself), ARGV[5] '1' when the caller waits: it then enters
-- the waiting writers (KEYS[2]) for ARGV[6] ms from the server's TIME (renewed by each attempt),
-- and new readers wait behind it.
-- Returns {0, token}, {1, the hash's PTTL}, {3, count} (hold lost), {4, 0} (upgrade refused),
-- {5, 0} (another kind of lock).
-- dlock:include fencing
-- dlock:include holds
local have = tonumber(ARGV[3])
local exists = redis.call('exists', KEYS[1]) == 1
local held = 0
if exists then
  local mode = redis.call('hget', KEYS[1], 'mode')
  if not mode then return {5, 0} end
  local bad
  held, bad = hold_count(KEYS[1], ARGV[2])
  if not held then return bad end
  if held == 0 and have == 0 then
    if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[4]) == 1 then return {4, 0} end
    if ARGV[5] == '1' then
      local now_ms = time_ms(redis.call('time'))
      redis.call('zadd', KEYS[2], 'GT', now_ms + tonumber(ARGV[6]), ARGV[4])
      expire_at_least(KEYS[2], ARGV[6])
    end
    return {1, redis.call('pttl', KEYS[1])}
  end
end
if held < have then return {3, held} end
if held > have then
  if held ~= have + 1 then redis.call('hset', KEYS[1], ARGV[2], tostring(have + 1)) end
  expire_at_least(KEYS[1], ARGV[1])
  if have > 0 then return {0, 0} end
elseif have > 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  expire_at_least(KEYS[1], ARGV[1])
  return {0, 0}
end
local last, other_exists = 0, false
if KEYS[3] then
  last, other_exists = fencing_read(KEYS[3], KEYS[4])
  if not last then return other_exists end
end
if held == 0 then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
end
redis.call('zrem', KEYS[2], ARGV[4])
local token = 0
if KEYS[3] then
  local bad
  token, bad = fencing_issue(KEYS[3], KEYS[4], last, other_exists)
  if not token then return bad end
end
return {0, token}
