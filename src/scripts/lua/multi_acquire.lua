-- Acquire several locks of one server at once, all or none (multi_lock, red_lock), in Redisson's
-- RLock layout, each with its own fencing token. Never queues or waits: the caller retries.
-- KEYS[1..n] the lock hashes; with fencing on, KEYS[n + i] the fencing counter of lock i's slot
-- and KEYS[2n + i] RFencedLock's counter of lock i (dlock/keys.hpp). The keys may span slots on
-- a single server; in a cluster they share one.
-- ARGV[1] lease ms, ARGV[2] n, ARGV[2 + i] the owner field of lock i (each a fresh lease owner).
-- Returns {0, token_1, ..., token_n} when all are taken (tokens 0 with fencing off); {1, pttl, i}
-- when lock i is held (by anyone: an owner is never found holding already, its field being
-- new), with nothing taken; {5, i} when lock i is a read-write lock's hash (errc::wrong_kind).
-- Unlike mutex_acquire.lua it does not honour dlock's yield marker (a lock left for a moment to
-- Redisson's waiters): a multi-lock takes a free lock as Redisson itself would.
-- dlock:include fencing
local n = tonumber(ARGV[2])
local fenced = #KEYS > n
for i = 1, n do
  if redis.call('exists', KEYS[i]) == 1 then
    -- (HEXISTS fails with WRONGTYPE on a key of another type: errc::wrong_type.)
    if redis.call('hexists', KEYS[i], 'mode') == 1 then return {5, i} end
    return {1, redis.call('pttl', KEYS[i]), i}
  end
end
-- Every counter is read (and checked) before anything is written: Redis does not undo a
-- script's earlier writes when a later command fails.
local last, other = {}, {}
if fenced then
  for i = 1, n do
    last[i], other[i] = fencing_read(KEYS[n + i], KEYS[2 * n + i])
    if not last[i] then return other[i] end
  end
end
local out = {0}
local now, previous = nil, 0
for i = 1, n do
  redis.call('hset', KEYS[i], ARGV[2 + i], '1')
  redis.call('pexpire', KEYS[i], ARGV[1])
  local token = 0
  if fenced then
    now = now or redis.call('time')
    local bad
    -- `previous`: the counters read may be one slot's, already advanced by this script.
    token, bad = fencing_issue(KEYS[n + i], KEYS[2 * n + i], math.max(last[i], previous),
                               other[i], now)
    if not token then return bad end
    previous = token
  end
  out[i + 1] = token
end
return out
