-- A consistent snapshot of a lock of any kind (mutex, fair, read-write), for inspect() /
-- `dlock status`.
-- KEYS[1] lock hash, KEYS[2] fencing counter (KEYS[1] again: none, fencing off), KEYS[3] holder
-- descriptions (keys::holder_info), KEYS[4] a mutex's waiter queue (keys::waiter_queue).
-- ARGV (optional; without them the reply stops after `waiters queued`): ARGV[1] RFairLock's
-- queue, ARGV[2] its deadlines (keys::fair_queue, fair_timeouts), ARGV[3] dlock's waiting
-- writers of a read-write lock (keys::waiting_writers), ARGV[4] the most entries to list of
-- each. They share KEYS[1]'s slot, and are not declared as keys, so that a user whose ACL
-- grants only a mutex's keys may still inspect: each is read with pcall, and one that cannot be
-- read (NOPERM, another type) reads as absent.
-- Returns {type of KEYS[1], HGETALL KEYS[1] (or {} if not a hash), PTTL KEYS[1],
--          counter or false, HGETALL KEYS[3], waiters queued,
--          LLEN of the fair queue, {owner, ms until its deadline or false (none), ...} for its
--          first ARGV[4] owners in order,
--          ZCARD of the waiting writers, {owner, ms until its deadline, ...} for the ARGV[4] with
--          the earliest deadlines}
-- ARGV[5] (optional) a leased semaphore's permits (keys::permit_timeouts, read as ARGV[1..3]
-- are). With it the reply goes on: {the counter (GET KEYS[1]) when KEYS[1] is a string, else
-- false; ZCARD of ARGV[5]; {permit id, ms until its deadline or false (never: a Redisson
-- permit leased without a lease time), ...} for the ARGV[4] with the earliest deadlines}.
-- Deadlines are relative to the server's TIME (negative: passed).
local kind = redis.call('type', KEYS[1])['ok']
local fields = {}
if kind == 'hash' then
  fields = redis.call('hgetall', KEYS[1])
end
local counter = false
if KEYS[2] ~= KEYS[1] then counter = redis.call('get', KEYS[2]) end
local queued = redis.pcall('zcard', KEYS[4])
if type(queued) ~= 'number' then queued = 0 end
local out = {kind, fields, redis.call('pttl', KEYS[1]), counter, redis.call('hgetall', KEYS[3]),
             queued}
if not ARGV[1] then return out end

-- A reply, or `default` when it is an error.
local function read(default, ...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then return default end
  return r
end
local limit = tonumber(ARGV[4])
local now_ms = false
local function until_ms(score)
  if not score then return false end
  if not now_ms then
    local t = redis.call('time')
    now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return math.floor(tonumber(score) - now_ms)
end

local fair_length = read(0, 'llen', ARGV[1])
local fair = {}
if fair_length > 0 then
  for _, owner in ipairs(read({}, 'lrange', ARGV[1], 0, limit - 1)) do
    fair[#fair + 1] = owner
    fair[#fair + 1] = until_ms(read(false, 'zscore', ARGV[2], owner))
  end
end
local writers_count = read(0, 'zcard', ARGV[3])
local writers = {}
if writers_count > 0 then
  local entries = read({}, 'zrange', ARGV[3], 0, limit - 1, 'withscores')
  for i = 1, #entries, 2 do
    writers[#writers + 1] = entries[i]
    writers[#writers + 1] = until_ms(entries[i + 1])
  end
end
out[#out + 1] = fair_length
out[#out + 1] = fair
out[#out + 1] = writers_count
out[#out + 1] = writers
if not ARGV[5] then return out end

local value = false
if kind == 'string' then value = redis.call('get', KEYS[1]) end
local permits_count = read(0, 'zcard', ARGV[5])
local permits = {}
if permits_count > 0 then
  local entries = read({}, 'zrange', ARGV[5], 0, limit - 1, 'withscores')
  for i = 1, #entries, 2 do
    permits[#permits + 1] = entries[i]
    local score = tonumber(entries[i + 1])
    if score >= 922337203685477 then
      permits[#permits + 1] = false
    else
      permits[#permits + 1] = until_ms(score)
    end
  end
end
out[#out + 1] = value
out[#out + 1] = permits_count
out[#out + 1] = permits
return out
