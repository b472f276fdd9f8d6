-- Hold counts, shared by the acquire scripts of every lock kind: a field of the lock hash counts
-- one owner's holds (Redisson's layout). A field that is not a count is an error, never a hold.
local function hold_count(key, field)
  local text = redis.call('hget', key, field)
  if not text then return 0 end
  if not string.match(text, '^%d+$') or #text > 9 then
    return nil, redis.error_reply('ERR lock field ' .. field .. ' of ' .. key ..
                                  ' is not a hold count')
  end
  return tonumber(text)
end

-- The server's time in ms, from a TIME reply.
local function time_ms(now)
  return now[1] * 1000 + math.floor(now[2] / 1000)
end

-- Sets the key's expiry to `ms` unless it already lasts longer.
local function expire_at_least(key, ms)
  if redis.call('pttl', key) < tonumber(ms) then redis.call('pexpire', key, ms) end
end
