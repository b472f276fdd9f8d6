-- Acquire or re-enter a reentrant lock in Redisson's RLock layout, issuing a fencing token.
-- KEYS[1] lock hash, KEYS[2] waiter queue, KEYS[3] waiter records, KEYS[4] yield marker
-- (dlock/keys.hpp), KEYS[5] the slot's fencing counter and KEYS[6] RFencedLock's counter of the
-- name (both absent: fencing off, token 0).
-- ARGV[1] lease ms, ARGV[2] owner field <client-uuid>:<thread-or-lease>, ARGV[3] the hold count
-- the caller has now (0: a first acquisition), ARGV[4] its waiter ticket ('': it will not wait),
-- ARGV[5] how long its queue record stays valid without a new attempt (ms), ARGV[6] its client
-- id, ARGV[7] '1' when a Redisson unlock woke it (the yield marker does not apply).
-- Returns {0, token} when the caller holds the lock (token 0 for a re-entry), {1, pttl} when
-- another owner holds it, {2, pttl} when it is free but left to Redisson's waiters for pttl ms,
-- {3, count} when the caller's field holds fewer holds than it expects (its hold was lost), {5, 0}
-- when the hash is a read-write lock's (it has `mode`: errc::wrong_kind).
-- Idempotent: a resend whose first send was applied finds the count it expects plus one and
-- takes it as it is (a first acquisition then takes a new token). An unlock that handed the
-- lock to this waiter (mutex_release.lua) left its field at 1 with its lease and the token in
-- its record: its attempt takes it the same way, with that token.
-- dlock:include fencing
local have = tonumber(ARGV[3])
local ticket = ARGV[4]
local held = 0
local exists = have > 0 or redis.call('exists', KEYS[1]) == 1
if exists then
  if redis.call('hexists', KEYS[1], 'mode') == 1 then return {5, 0} end  -- a read-write lock
  local field = redis.call('hget', KEYS[1], ARGV[2])
  if field then
    if not string.match(field, '^%d+$') or #field > 9 then
      return redis.error_reply('ERR lock field ' .. ARGV[2] .. ' of ' .. KEYS[1] ..
                               ' is not a hold count')
    end
    held = tonumber(field)
  end
end
local busy, pttl = 0, 0
if held == 0 and have == 0 then
  if exists then
    busy, pttl = 1, redis.call('pttl', KEYS[1])
  elseif ARGV[7] ~= '1' and redis.call('exists', KEYS[4]) == 1 then
    busy, pttl = 2, redis.call('pttl', KEYS[4])
  end
end
if busy ~= 0 then
  if ticket ~= '' then
    -- The queue only orders hand-offs: its commands are pcalls, so a queue key of another type
    -- or OOM never fails the lock (the caller then waits by its re-checks).
    local now = redis.call('time')
    local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
    local now_us = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
    local fenced = KEYS[5] and '1' or '0'
    local record = digits(now_ms + tonumber(ARGV[5])) .. ' ' .. ARGV[6] .. ' ' .. ARGV[2] .. ' ' ..
                   ARGV[1] .. ' ' .. fenced
    if type(redis.pcall('zadd', KEYS[2], 'NX', now_us, ticket)) == 'number' and
       type(redis.pcall('hset', KEYS[3], ticket, record)) == 'number' then
      for k = 2, 3 do
        local kttl = redis.pcall('pttl', KEYS[k])
        if type(kttl) == 'number' and kttl < tonumber(ARGV[5]) then
          redis.pcall('pexpire', KEYS[k], ARGV[5])
        end
      end
    end
  end
  return {busy, pttl}
end
if held < have then return {3, held} end
local token = 0
if held > have then
  -- Applied before (a resend), handed over by an unlock, or a re-entry abandoned after it was
  -- applied: the caller's count is have + 1 from now on.
  if held ~= have + 1 then redis.call('hset', KEYS[1], ARGV[2], tostring(have + 1)) end
  redis.call('pexpire', KEYS[1], ARGV[1])
  if have > 0 then return {0, 0} end
  if ticket ~= '' then
    local record = redis.pcall('hget', KEYS[3], ticket)
    if type(record) == 'string' and string.sub(record, 1, 2) == 'g ' then
      redis.pcall('hdel', KEYS[3], ticket)
      return {0, tonumber(string.sub(record, 3))}
    end
  end
elseif have > 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {0, 0}
end
-- A first acquisition. Nothing is written before the counter is known to be usable: Redis does
-- not undo a script's earlier writes when a later command fails.
local last, other_exists = 0, false
if KEYS[5] then
  last, other_exists = fencing_read(KEYS[5], KEYS[6])
  if not last then return other_exists end
end
if held == 0 then
  redis.call('hset', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  if ARGV[7] == '1' then redis.call('del', KEYS[4]) end
end
if KEYS[5] then
  local bad
  token, bad = fencing_issue(KEYS[5], KEYS[6], last, other_exists)
  if not token then return bad end
end
if ticket ~= '' and redis.pcall('zrem', KEYS[2], ticket) == 1 then
  redis.pcall('hdel', KEYS[3], ticket)
end
return {0, token}
