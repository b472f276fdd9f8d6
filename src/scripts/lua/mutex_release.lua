-- Release one hold of a reentrant lock in Redisson's RLock layout — or let a waiter leave.
-- KEYS[1] lock hash, KEYS[2] channel redisson_lock__channel:{name},
-- KEYS[3] waiter queue dlock_lock_waiters:{name}, KEYS[4] waiter expiries
-- dlock_lock_waiter_expiry:{name} (see mutex_acquire.lua; both may be left out),
-- KEYS[5] and KEYS[6] (with ARGV[7]) the fencing counters as mutex_acquire.lua's KEYS[2] and
-- KEYS[5] (KEYS[6] optional)
-- ARGV[1] unlock message ('0': wake one waiter), ARGV[2] lease in ms, ARGV[3] owner field,
-- ARGV[4] the hold count the caller has now, ARGV[5] hand-off window in ms ('0' or absent: none)
-- ARGV[6] ('' or absent: a release) a waiter leaving (ARGV[2..4] are then ignored): its ticket.
-- It leaves the queue, and a hand-off kept for it, or a grant made to it, which it will not
-- take, is passed on as an unlock would.
-- ARGV[7] how this client fences ('n', 's', 'l' as mutex_acquire.lua's ARGV[9]; '' or absent:
-- it makes no grants): the head of the queue is granted the lock when its entry says it takes
-- grants fenced the same way (below).
-- Returns nil when ARGV[3] does not hold the lock (nothing changes), 0 when the count went down
-- and the lock is still held (lease reset to ARGV[2]), 1 when the lock was released (key
-- deleted; a waiter named, or ARGV[1] published: below), -1 when the count is already ARGV[4] - 1: a resent release that
-- was applied, so it is not applied twice. A leaving waiter gets 1 when it passed a hand-off
-- on, nil otherwise.
if ARGV[6] and ARGV[6] ~= '' then
  if KEYS[3] then redis.pcall('zrem', KEYS[3], ARGV[6]) end
  if KEYS[4] then redis.pcall('hdel', KEYS[4], ARGV[6]) end
  -- Granted to it (the marker names it: it never took the grant, mutex_acquire.lua), or kept for it.
  local mark = redis.pcall('hget', KEYS[1], 'dlock:grant')
  local granted = type(mark) == 'string' and string.match(mark, '^(%d+) ') == ARGV[6]
  if not granted and (redis.pcall('hget', KEYS[1], 'dlock:handoff') ~= ARGV[6] or
                      redis.call('hlen', KEYS[1]) ~= 1) then
    return nil
  end
else
  local held = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
  -- A hand-off or a grant's marker is nobody's hold.
  if not held or held == 0 or ARGV[3] == 'dlock:handoff' or ARGV[3] == 'dlock:grant' then
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
-- The queue's head: none (the usual uncontended release) costs one ZPOPMIN of a missing key, and
-- nothing below is defined — Lua 5.1 creates a script's functions anew on every call.
local popped = KEYS[3] and redis.pcall('zpopmin', KEYS[3])
if type(popped) == 'table' and popped[1] then
  -- dlock:include fencing
  -- A queue entry's record (mutex_acquire.lua): '<stale-at ms> <client id>', and for a waiter
  -- that takes grants '|<mode>|<at ms>|<sent>|<owner>' after the id (the client id absent for
  -- older dlocks). Returns it as a table (stale_at nil when unreadable), or nil and true when it
  -- cannot be read.
  local function entry_of(ticket)
    if not KEYS[4] then return nil end
    local v = redis.pcall('hget', KEYS[4], ticket)
    if type(v) == 'table' and v.err then return nil, true end
    local ms, rest = string.match(v or '', '^(%d+) ?(%S*)$')
    if not ms then return {} end
    local rec = {stale_at = tonumber(ms)}
    local id, mode, at, sent, owner = string.match(rest, '^([^|]+)|([^|]+)|(%d+)|(%d+)|([^|]+)$')
    if id then
      rec.id, rec.mode, rec.at, rec.sent, rec.owner = id, mode, tonumber(at), sent, owner
    elseif rest ~= '' then
      rec.id = rest
    end
    return rec
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
  -- The queue's head that is not stale, with its record and the server time (TIME's reply);
  -- `head`: ZPOPMIN's reply that found the queue (below).
  local function live_head(head)
    local now = redis.call('time')
    local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
    for i = 1, 100 do  -- bounded: a pile of stale entries is cleared over several releases
      if i > 1 then head = redis.pcall('zpopmin', KEYS[3]) end
      if type(head) ~= 'table' or not head[1] or head.err then return nil end
      if not KEYS[4] then return head[1], {}, now end
      local rec, unknown = entry_of(head[1])
      if unknown then return head[1], {}, now end  -- cannot tell: live
      redis.pcall('hdel', KEYS[4], head[1])
      if rec.stale_at and rec.stale_at > now_ms then return head[1], rec, now end
    end
    return nil
  end
  -- Grant: the lock goes straight to waiter `head` — its owner field with count 1, the marker
  -- {'dlock:grant': '<ticket> <token>'}, the window as its expiry, and a fencing token issued as
  -- its acquire would — and its client is told `=<ticket> <token> <ms> <sent> <window>` on its
  -- waiter channel: ms, how long ago (server time) its latest attempt wrote its record; sent, that
  -- attempt's own send time from the record; window, the grant's expiry in ms (this releaser's
  -- ARGV[5]). From that the waiter trusts the grant from no later
  -- than the grant was made: it holds the lock without an acquire of its own (its confirmation
  -- sets its lease: mutex_acquire.lua). Only for an entry that takes grants fenced as this client
  -- fences (the counters are this client's), and only while someone hears the message: else the
  -- grant is undone (a token may have been used up: tokens need only increase) and the hand-off
  -- goes on as a reservation. Every write is a pcall: a refusal (over maxmemory) leaves no grant.
  local function grant(head, rec, window, now)
    local mode = ARGV[7]
    if not (mode and mode ~= '' and rec.mode == mode and rec.id and rec.at and rec.owner and rec.sent and
            KEYS[5]) then
      return false
    end
    local token = 0
    if mode ~= 'n' then
      local last, other_exists = fencing_read(KEYS[5], KEYS[6])
      if not last then return false end  -- a counter of another type: its acquire reports it
      token = fencing_issue(KEYS[5], KEYS[6], last, other_exists, now)
      if not token then return false end
    end
    local granted = type(redis.pcall('hset', KEYS[1], rec.owner, '1', 'dlock:grant',
                                     head .. ' ' .. digits(token))) == 'number' and
                    type(redis.pcall('pexpire', KEYS[1], window)) == 'number'
    if granted then
      local message = '=' .. head .. ' ' .. digits(token) .. ' ' ..
                      digits(math.max(now[1] * 1000 + math.floor(now[2] / 1000) - rec.at, 0)) ..
                      ' ' .. rec.sent .. ' ' .. window
      local heard = redis.pcall('publish', 'dlock_waiter__channel:' .. rec.id, message)
      if type(heard) == 'number' and heard > 0 then return true end
    end
    redis.call('del', KEYS[1])
    return false
  end
  -- The next in line stands by: '-' and its ticket (on the Redisson channel a negative number,
  -- which Redisson's LockPubSub ignores too). Its client re-checks when the window has passed, so
  -- a named waiter that died costs the queue the window, not a whole re-check interval.
  local function stand_by_next()
    local nxt = redis.pcall('zrange', KEYS[3], 0, 0)
    if type(nxt) == 'table' and nxt[1] then
      local rec = entry_of(nxt[1])
      tell(rec and rec.id, '-' .. nxt[1])
    end
  end
  local head, rec, now = live_head(popped)
  if head then
    -- ARGV[5] goes to PEXPIRE and into the message as sent (digits: a number argument would go
    -- through printf's floating-point path); one that is not refuses the grant and the hand-off.
    local window = (tonumber(ARGV[5] or '0') or 0) > 0 and ARGV[5]
    -- No stand-by after a grant: telling the next in line woke a third process at every
    -- hand-off (W3: ~40 us of it), for one failure only — a grantee whose process stalls while
    -- its client still hears. Its grant ends with the window; the others find the lock free
    -- at their next re-check (config::wait_recheck), and a queue entry of a stalled waiter goes
    -- stale within its validity, so a stall costs at most one grant.
    if window and grant(head, rec, window, now) then return 1 end
    -- Hand-off: keep the lock for the named waiter for a moment (mutex_acquire.lua), so that
    -- nobody takes it between this unlock and that waiter's acquire. HSET may be refused (over
    -- maxmemory): then the lock is simply free. A reservation must never outlive its window.
    local kept = false
    if window and type(redis.pcall('hset', KEYS[1], 'dlock:handoff', head)) == 'number' then
      kept = type(redis.pcall('pexpire', KEYS[1], window)) == 'number'
      if not kept then redis.call('del', KEYS[1]) end
    end
    local told = tell(kept and rec.id, head)
    if kept then
      stand_by_next()
      if told then return 1 end
    end
  end
end
redis.pcall('publish', KEYS[2], ARGV[1])
return 1
