-- A consistent snapshot of a lock, for inspect() / `dlock status`.
-- KEYS[1] lock hash, KEYS[2] fencing counter (KEYS[1] again: none, fencing off), KEYS[3] holder
-- descriptions (keys::holder_info), KEYS[4] waiter queue (keys::waiter_queue)
-- Returns {type of KEYS[1], HGETALL KEYS[1] (or {} if not a hash), PTTL KEYS[1],
--          counter or false, HGETALL KEYS[3], waiters queued}.
local kind = redis.call('type', KEYS[1])['ok']
local fields = {}
if kind == 'hash' then
  fields = redis.call('hgetall', KEYS[1])
end
local counter = false
if KEYS[2] ~= KEYS[1] then counter = redis.call('get', KEYS[2]) end
local queued = redis.pcall('zcard', KEYS[4])
if type(queued) ~= 'number' then queued = 0 end
return {kind, fields, redis.call('pttl', KEYS[1]), counter, redis.call('hgetall', KEYS[3]), queued}
