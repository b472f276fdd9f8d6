-- Acquire or re-enter the read side of a read-write lock in Redisson's RReadWriteLock layout,
-- issuing a fencing token for a first acquisition.
-- KEYS[1] the hash (`mode` read|write, readers' `<owner>` -> count, the writer's
-- `<owner>:write` -> count), KEYS[2] dlock's waiting writers (keys::waiting_writers), KEYS[3]
-- the slot's fencing counter and KEYS[4] RFencedLock's counter of the name (absent: fencing off).
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] the hold count the caller has now (0: a first
-- acquisition), ARGV[4] the prefix of the caller's hold keys, {name}:<owner>:rwlock_timeout:
-- hold n lives in prefix .. n with its own lease; the hash lasts at least as long. Every
-- acquisition or re-entry sets the lease of all of the owner's holds again.
-- A first read hold waits while another owner holds the write side, or while a dlock writer
-- waits (writer preference: a live entry of KEYS[2]); the writer itself may take read holds (a
-- downgrade), and a reader's re-entries never wait.
-- Returns {0, token}, {1, ms to wait at most}, {3, count} (hold lost), {5, 0} (the hash is
-- another kind of lock: no `mode`), as fair_acquire.lua.
-- dlock:include fencing
-- dlock:include holds
local have = tonumber(ARGV[3])
local exists = redis.call('exists', KEYS[1]) == 1
local mode = false
local held = 0
if exists then
  mode = redis.call('hget', KEYS[1], 'mode')
  if not mode then return {5, 0} end
  local bad
  held, bad = hold_count(KEYS[1], ARGV[2])
  if not held then return bad end
end
if held < have then return {3, held} end
-- The n-th hold of the owner, and the lease of its others set again (as a mutex's re-entry sets
-- its lease): all of an owner's read holds end together.
local function add_hold(n)
  for k = 1, math.min(n - 1, 1000) do redis.call('pexpire', ARGV[4] .. k, ARGV[1]) end
  redis.call('set', ARGV[4] .. n, '1', 'PX', ARGV[1])
  expire_at_least(KEYS[1], ARGV[1])
end
if held > have then
  if held ~= have + 1 then redis.call('hset', KEYS[1], ARGV[2], tostring(have + 1)) end
  add_hold(have + 1)
  if have > 0 then return {0, 0} end
elseif have > 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  add_hold(have + 1)
  return {0, 0}
elseif mode == 'write' then
  if redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
    return {1, redis.call('pttl', KEYS[1])}
  end
else
  local now_ms = time_ms(redis.call('time'))
  redis.call('zremrangebyscore', KEYS[2], '-inf', now_ms)
  local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
  if first[1] then
    if exists then return {1, redis.call('pttl', KEYS[1])} end
    return {1, math.max(tonumber(first[2]) - now_ms, 0)}
  end
end
local last, other_exists = 0, false
if KEYS[3] then
  last, other_exists = fencing_read(KEYS[3], KEYS[4])
  if not last then return other_exists end
end
if held == 0 then
  if not exists then redis.call('hset', KEYS[1], 'mode', 'read') end
  redis.call('hset', KEYS[1], ARGV[2], '1')
  add_hold(1)
end
local token = 0
if KEYS[3] then
  local bad
  token, bad = fencing_issue(KEYS[3], KEYS[4], last, other_exists)
  if not token then return bad end
end
return {0, token}
