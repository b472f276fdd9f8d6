-- Renew a batch of leases (one script for up to 100 holds), or only check them.
-- KEYS[i] lock hash i; ARGV[1] lease in ms ('0': check only, no lease touched); ARGV[i + 1] the
-- owner field expected in KEYS[i].
-- Returns an array: for each hold the key's PTTL after the renewal (-1: no expiry), or -2 where
-- the owner does not hold KEYS[i] (the lease is lost; a key of another type counts as not held).
local out = {}
for i = 1, #KEYS do
  if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    if ARGV[1] ~= '0' then redis.call('pexpire', KEYS[i], ARGV[1]) end
    out[i] = redis.call('pttl', KEYS[i])
  else
    out[i] = -2
  end
end
return out
