-- Fencing tokens, shared by mutex_acquire.lua and mutex_release.lua (a hand-off issues the
-- grantee's; cmake/dlock_embed_lua.cmake puts this text where a script includes `fencing`).
-- A first acquisition sets the counter to max(counter + 1, server time in microseconds) and
-- returns it. Strictly increasing while the counter lives, like an INCR; and when the counter is
-- gone — a restart without persistence, a failover that lost the last writes — still above
-- every token issued before, as long as the server's clock has not gone back by more than the
-- time since. `advanced` is the counter of the lock's cluster slot (keys::slot_fencing_counter),
-- shared by every lock of that slot, so tokens increase per lock too.
-- `other` is Redisson RFencedLock's counter of the name (redisson_lock_token:{name}): read too,
-- so that tokens stay above what RFencedLock issued, and advanced if it exists, so that
-- RFencedLock's next INCR goes on from here. Never created.

-- A whole number from 0 to 2^53 as digits (every number these scripts print). '%.0f' goes
-- through printf's floating-point path, several times slower; '%d' alone prints a C long, which
-- is 32 bits on some servers (32-bit builds): two parts below 10^9 fit in any long.
local function digits(n)
  if n < 1e9 then return string.format('%d', n) end
  local high = math.floor(n / 1e9)
  return string.format('%d%09d', high, n - high * 1e9)
end

-- The last token the counters issued (0 if neither exists) and whether `other` exists; or nil
-- and an error reply when a counter is not an integer below 2^53 (WRONGTYPE for an `advanced`
-- of another type: it would be overwritten). Both are read in one MGET, which reads a key of
-- another type as missing: an `other` of another type is no counter (it issued nothing, and it
-- is never written); a missing `advanced` is read again with GET, which tells. Writes nothing.
local function fencing_read(advanced, other)
  local texts = other and redis.pcall('mget', advanced, other) or {}
  if texts.err then return nil, texts end
  if not texts[1] then texts[1] = redis.pcall('get', advanced) end
  local last, other_exists = 0, false
  for i = 1, other and 2 or 1 do  -- a loop, not a function: one is created on every call
    local text = texts[i]
    if type(text) == 'table' and text.err then return nil, text end
    if text then
      -- Digits only, and below 2^53 - 1, where Lua's numbers stop counting by one (digit strings
      -- of one length compare as their numbers — Lua uses strcoll, and digits collate in order in
      -- the C and glibc locales — so no conversion before the check).
      if not string.match(text, '^%d+$') or #text > 16 or
         (#text == 16 and text >= '9007199254740991') then
        return nil, redis.error_reply('ERR fencing counter ' .. (i == 1 and advanced or other) ..
                                      ' is not an integer below 2^53')
      end
      last = math.max(last, tonumber(text))
      if i == 2 then other_exists = true end
    end
  end
  return last, other_exists
end

-- Issues the token after `last` (fencing_read) and writes it to the counter(s). Returns it, or
-- nil and the error reply when a SET is refused (over maxmemory). `now`: the script's TIME
-- reply, if it has one already.
local function fencing_issue(advanced, other, last, other_exists, now)
  now = now or redis.call('time')
  local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local text
  if token > last then
    -- The usual case: the clock's microseconds, whose digits TIME gave already.
    text = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
  else
    token = last + 1
    text = digits(token)
  end
  local done = redis.pcall('set', advanced, text)
  if type(done) == 'table' and done.err then return nil, done end
  if other_exists then
    done = redis.pcall('set', other, text)
    if type(done) == 'table' and done.err then return nil, done end
  end
  return token
end
