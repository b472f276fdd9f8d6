-- Reads and writes of a semaphore's counter (RSemaphore and RPermitExpirableSemaphore layouts).
-- KEYS[1] the counter, KEYS[2] the sorted set of leased permits (leased_semaphore), or the
-- marker of one counting acquisition (`undo`). ARGV[1] the operation, ARGV[2] a number of
-- permits, ARGV[3] the channel redisson_sc:{name}, ARGV[4] '1' in a Redis Cluster.
-- A leased semaphore's expired permits are reclaimed first. Operations and replies:
-- - `available`: the permits available (0 when the counter is absent);
-- - `leased`: the permits leased now (leased_semaphore);
-- - `set`: sets the counter to ARGV[2] if it is absent and publishes it: 1, else 0;
-- - `add`: adds ARGV[2] (may be negative) to the counter, publishing it when positive: the count;
-- - `release`: adds ARGV[2] and publishes the count (RSemaphore.release): the count;
-- - `undo`: if the marker KEYS[2] is there, deletes it and adds back the permits it names,
--   publishing the count: 1; else nil (the acquisition was not applied, or was undone).
-- dlock:include holds
-- dlock:include permits
local op, n, sharded = ARGV[1], tonumber(ARGV[2]), ARGV[4] == '1'
if op == 'undo' then
  local taken = redis.call('get', KEYS[2])
  if not taken then return nil end
  redis.call('del', KEYS[2])
  publish_count(ARGV[3], sharded, redis.call('incrby', KEYS[1], taken))
  return 1
end
local available, bad = permits_of(KEYS[1])
if not available then return bad end
if KEYS[2] then
  reclaim(KEYS[1], KEYS[2], ARGV[3], sharded, time_ms(redis.call('time')))
  available = permits_of(KEYS[1])
end
if op == 'available' then return available end
if op == 'leased' then return KEYS[2] and redis.call('zcard', KEYS[2]) or 0 end
if op == 'set' then
  if redis.call('exists', KEYS[1]) == 1 then return 0 end
  redis.call('set', KEYS[1], ARGV[2])
  publish_count(ARGV[3], sharded, ARGV[2])
  return 1
end
if op == 'add' or op == 'release' then
  local value = redis.call('incrby', KEYS[1], ARGV[2])
  if op == 'release' or n > 0 then publish_count(ARGV[3], sharded, value) end
  return value
end
return redis.error_reply('ERR unknown semaphore operation ' .. op)
