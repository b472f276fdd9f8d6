-- Release one hold of a reentrant lock in Redisson's RLock layout — or let a waiter leave.
-- KEYS[1] lock hash, KEYS[2] channel redisson_lock__channel:{name},
-- KEYS[3] waiter queue dlock_lock_waiters:{name}, KEYS[4] waiter expiries
-- dlock_lock_waiter_expiry:{name} (see mutex_acquire.lua; both may be left out)
-- ARGV[1] unlock message ('0': wake one waiter), ARGV[2] lease in ms, ARGV[3] owner field,
-- ARGV[4] the hold count the caller has now, ARGV[5] hand-off window in ms ('0' or absent: none)
-- ARGV[6] (a waiter leaving; ARGV[2..4] are then ignored) the waiter's ticket: it leaves the
-- queue, and a hand-off kept for it, which it will not take, is passed on as an unlock would.
-- Returns nil when ARGV[3] does not hold the lock (nothing changes), 0 when the count went down
-- and the lock is still held (lease reset to ARGV[2]), 1 when the lock was released (key
-- deleted; a waiter named, or ARGV[1] published: below), -1 when the count is already ARGV[4] - 1: a resent release that
-- was applied, so it is not applied twice. A leaving waiter gets 1 when it passed a hand-off
-- on, nil otherwise.
if ARGV[6] then
  if KEYS[3] then redis.pcall('zrem', KEYS[3], ARGV[6]) end
  if KEYS[4] then redis.pcall('hdel', KEYS[4], ARGV[6]) end
  if redis.pcall('hget', KEYS[1], 'dlock:handoff') ~= ARGV[6] or redis.call('hlen', KEYS[1]) ~= 1 then
    return nil
  end
else
  local held = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
  if held == 0 or ARGV[3] == 'dlock:handoff' then  -- a hand-off is nobody's hold
    return nil
  end
  if held == tonumber(ARGV[4]) - 1 then
    return -1
  end
  if held > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
  end
end
-- The last hold: DEL at once (Redisson decrements to 0 first, to the same effect). Over
-- maxmemory with noeviction Redis refuses HINCRBY but not DEL, so a holder can still release.
redis.call('del', KEYS[1])
-- Wake one dlock waiter across all processes: the queue's head — the longest-waiting entry
-- that is not stale (stale ones, of waiters that died, are dropped on the way) — is named by
-- its ticket. When the lock is kept for it (below), on its own client's channel,
-- dlock_waiter__channel:<client id> (KEYS[4] records the id with the entry): one message to
-- one process, where the Redisson channel would wake every process that waits on this lock;
-- and no '0' follows: a waiter woken by it, Redisson's too, would only find the lock held.
-- Otherwise on the Redisson channel, followed by the '0' that dlock clients then skip: when
-- nothing is kept (the lock is free to all), when the entry has no client id (a dlock from
-- before the waiter channel), and when nobody hears it on the waiter channel (this user may
-- not publish there, the client died or is reconnecting) — the named client listens on the
-- lock's channel too, and Redisson's waiters learn that the lock may come free.
-- pcall: an ACL user without channel rights (Redis 7's default) may not publish; the lock is
-- released all the same and waiters find out by their re-checks.
-- The queue's commands are pcalls: a queue key of another type never fails a release that has
-- already deleted the lock (waiters then find out by their re-checks).
-- A queue entry's record '<stale-at ms> <client id>' (the id absent for older dlocks): the
-- stale-at time and id, or a third result true when it cannot be read.
local function entry_of(ticket)
  if not KEYS[4] then return nil end
  local v = redis.pcall('hget', KEYS[4], ticket)
  if type(v) == 'table' and v.err then return nil, nil, true end
  local ms, id = string.match(v or '', '^(%d+) ?(%S*)$')
  if id == '' then id = nil end
  return tonumber(ms), id, false
end
-- Publishes `msg` to client `id`'s waiter channel; true if someone there heard it. Else on the
-- lock's channel; false.
local function tell(id, msg)
  if id then
    local heard = redis.pcall('publish', 'dlock_waiter__channel:' .. id, msg)
    if type(heard) == 'number' and heard > 0 then return true end
  end
  redis.pcall('publish', KEYS[2], msg)
  return false
end
local function live_head()
  local now = redis.call('time')
  local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
  for _ = 1, 100 do  -- bounded: a pile of stale entries is cleared over several releases
    local head = redis.pcall('zpopmin', KEYS[3])
    if type(head) ~= 'table' or not head[1] or head.err then return nil end
    if not KEYS[4] then return head[1] end
    local stale_at, id, unknown = entry_of(head[1])
    if unknown then return head[1] end  -- cannot tell: live
    redis.pcall('hdel', KEYS[4], head[1])
    if stale_at and stale_at > now_ms then return head[1], id end
  end
  return nil
end
if KEYS[3] and redis.call('exists', KEYS[3]) == 1 then
  local head, id = live_head()
  if head then
    -- Hand-off: keep the lock for the named waiter for a moment (mutex_acquire.lua), so that
    -- nobody takes it between this unlock and that waiter's acquire. HSET may be refused (over
    -- maxmemory): then the lock is simply free. A reservation must never outlive its window.
    local window = tonumber(ARGV[5] or '0') or 0
    local kept = false
    if window > 0 and type(redis.pcall('hset', KEYS[1], 'dlock:handoff', head)) == 'number' then
      kept = type(redis.pcall('pexpire', KEYS[1], window)) == 'number'
      if not kept then redis.call('del', KEYS[1]) end
    end
    local told = tell(kept and id, head)
    if kept then
      -- The next in line stands by: '-' and its ticket (on the Redisson channel a negative
      -- number, which Redisson's LockPubSub ignores too). Its client re-checks when the window
      -- has passed, so a named waiter that died costs the queue the window, not a whole
      -- re-check interval.
      local nxt = redis.pcall('zrange', KEYS[3], 0, 0)
      if type(nxt) == 'table' and nxt[1] then
        local _, nid = entry_of(nxt[1])
        tell(nid, '-' .. nxt[1])
      end
      if told then return 1 end
    end
  end
end
redis.pcall('publish', KEYS[2], ARGV[1])
return 1
