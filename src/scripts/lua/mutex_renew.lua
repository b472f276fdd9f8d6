-- Renew a batch of watchdog leases (one script for up to ~100 holds), or only check them.
-- KEYS[i] lock hash i; ARGV[1] lease in ms ('0': check only, no lease touched);
-- ARGV[i + 1] the owner field expected in KEYS[i]
-- Returns an array: 1 where the owner still holds KEYS[i] (PEXPIRE ARGV[1] done), 0 where it
-- does not (the lease is lost; a key of another type counts as not held).
-- A renewal also ends a grant's marker ('dlock:grant', mutex_release.lua) if one is left: the
-- client renews only holds it took, so the grant is confirmed by it (a renewal that came before
-- the grant's own confirmation).
local out = {}
for i = 1, #KEYS do
  local ok = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if ok == 1 then
    if ARGV[1] ~= '0' then
      redis.call('pexpire', KEYS[i], ARGV[1])
      redis.call('hdel', KEYS[i], 'dlock:grant')
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
