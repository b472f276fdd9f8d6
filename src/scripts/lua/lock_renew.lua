-- Renew a batch of leases (one script for up to 100 holds), or only check them.
-- KEYS[i] lock hash i; ARGV[1] lease in ms ('0': check only, no lease touched); ARGV[i + 1] the
-- hold: a kind letter and the owner's field in KEYS[i]:
-- - 'h<field>' (mutex, fair_mutex): the field exists; the hash's lease is set to ARGV[1];
-- - 'w<field>' (a shared_mutex writer): the same, but a longer lease (its read holds) is kept;
-- - 'r<owner>' (a shared_mutex reader): the field counts n holds and each hold's key
--   {name}:<owner>:rwlock_timeout:<k> exists; those keys and the hash get at least ARGV[1].
--   Only this owner's keys: another reader that died expires (Redisson renews every reader's).
-- - 'p<ids>' (leased_semaphore permits; KEYS[i] the counter): each id (16 raw bytes) is in the
--   sorted set {name}:timeout with a deadline after the server's TIME; their deadlines become
--   TIME + ARGV[1]. Their reply is the time left before the earliest of them, not a PTTL.
-- dlock:include holds
-- Returns an array: for each hold the hash's PTTL after the renewal (-1: no expiry), or -2 where
-- the hold is gone (the lease is lost; a key of another type counts as not held).
local out = {}
local renew = ARGV[1] ~= '0'
local now
-- A leased semaphore's permits: the ms left of the earliest, or -2 when one is gone or expired.
local function permits_left(counter, packed)
  now = now or time_ms(redis.call('time'))
  local timeouts = (string.find(counter, '{', 1, true) and counter or ('{' .. counter .. '}')) ..
                   ':timeout'
  local left = nil
  for at = 1, #packed, 16 do
    local deadline = tonumber(redis.pcall('zscore', timeouts, string.sub(packed, at, at + 15)))
    if not deadline or deadline <= now then return -2 end
    left = math.min(left or deadline - now, deadline - now)
  end
  if not left then return -2 end
  if not renew then return left end
  for at = 1, #packed, 16 do
    redis.call('zadd', timeouts, 'xx', now + tonumber(ARGV[1]), string.sub(packed, at, at + 15))
  end
  return tonumber(ARGV[1])
end
for i = 1, #KEYS do
  local what, field = string.sub(ARGV[i + 1], 1, 1), string.sub(ARGV[i + 1], 2)
  local ok = false
  if what == 'p' then
    out[i] = permits_left(KEYS[i], field)
  elseif what == 'r' then
    local n = tonumber(redis.pcall('hget', KEYS[i], field))
    if n and n > 0 then
      local tag = string.find(KEYS[i], '{', 1, true) and KEYS[i] or ('{' .. KEYS[i] .. '}')
      local prefix = tag .. ':' .. field .. ':rwlock_timeout:'
      ok = true
      for k = 1, math.min(n, 1000) do
        if redis.call('exists', prefix .. k) == 0 then ok = false end
      end
      if ok and renew then
        for k = 1, math.min(n, 1000) do redis.call('pexpire', prefix .. k, ARGV[1]) end
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
          redis.call('pexpire', KEYS[i], ARGV[1])
        end
      end
    end
  elseif redis.pcall('hexists', KEYS[i], field) == 1 then
    ok = true
    if renew and (what == 'h' or redis.call('pttl', KEYS[i]) < tonumber(ARGV[1])) then
      redis.call('pexpire', KEYS[i], ARGV[1])
    end
  end
  if what ~= 'p' then out[i] = ok and redis.call('pttl', KEYS[i]) or -2 end
end
return out
