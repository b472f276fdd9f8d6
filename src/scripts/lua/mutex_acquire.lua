-- Acquire or re-enter a reentrant lock in Redisson's RLock layout, and issue a fencing token.
-- KEYS[1] lock hash (the lock's name), KEYS[2] fencing counter (dlock_fencing_counter, shared by
-- every lock of the database; or the lock's own redisson_lock_token:{name}, config per-lock),
-- KEYS[3] waiter queue dlock_lock_waiters:{name}, KEYS[4] waiter expiries
-- dlock_lock_waiter_expiry:{name}, KEYS[5] (optional; needs KEYS[3] and KEYS[4]) the other fencing
-- counter, read and, if it exists, advanced too (below)
-- ARGV[1] lease in ms, ARGV[2] owner field <client-uuid>:<thread-or-lease>,
-- ARGV[3] the hold count the caller has now (0 for a first acquisition),
-- ARGV[4] the caller's waiter ticket ('' or absent: it will not wait),
-- ARGV[5] how long its queue entry stays valid without a new attempt, in ms
-- (KEYS[3], KEYS[4], ARGV[4] and ARGV[5] may be left out together: no queue),
-- ARGV[6] '0': issue no fencing token (KEYS[2] is not touched — the client then passes the lock
-- hash there — and the token is 0),
-- ARGV[7] '1': this attempt answers an unlock that named the caller (release popped it from the
-- queue); if it finds the lock taken after all, it goes back to the front, not the back;
-- '2': it confirms a grant the caller took (below): it never acquires; '3': the first attempt
-- that carries this ticket (ARGV[4]), which cannot be in the queue yet ('0': it may be),
-- ARGV[8] the caller's client id: an unlock that names this waiter publishes its ticket on
-- dlock_waiter__channel:<id>, which only that client listens to (absent: on KEYS[1]'s Redisson
-- channel, as dlock did before; mutex_release.lua),
-- ARGV[9] (with ARGV[8]) the caller takes grants, and how it is fenced: 'n' no token, 's' from
-- the shared counter, 'l' from the lock's own ('' or absent: no grants), ARGV[10] the caller's
-- send time of this attempt (digits, echoed in a grant)
-- Returns {0, token} when the caller holds the lock (token: a first acquisition's fencing token;
-- 0 for a re-entry, which keeps its first acquisition's), {pttl} when another owner holds it, {-1} when the lock is kept for
-- or granted to another waiter (a hand-off, below: wait to be woken), or {-1, count} when the owner's field
-- holds a count the caller does not expect (its local view is stale) — and, confirming a grant,
-- when the grant is not the caller's to confirm (not held by ARGV[2], or granted to another
-- ticket).
-- Hand-off: an unlock that woke the queue's head left the lock hash as {'dlock:handoff':
-- ticket} (keys::handoff_field) with a short expiry. To everyone — Redisson's script too — the
-- lock is held; the named ticket takes it: the reservation is deleted and the acquisition
-- proceeds as on a free lock. (A named waiter that leaves instead passes it on: mutex_release.lua.)
-- Fencing tokens: a first acquisition issues one (lib/fencing.lua); a re-entry keeps its first's.
-- Grant: an unlock may hand the lock straight to the queue's head when its entry says it takes
-- grants (ARGV[9]): the hash then holds that waiter's owner field with count 1 and
-- {'dlock:grant': '<ticket> <token>'}, with a short expiry, and the waiter, told on its client's
-- channel, holds the lock from then on without an acquire (mutex_release.lua). Its confirmation
-- (ARGV[7] '2') sets its own lease and deletes the marker, returning the grant's token. An
-- attempt of the same owner that finds the grant (an attempt in flight, or the waiter never
-- heard of it) takes it as its own, as a resent acquisition (below): the marker goes too, so a
-- late leave of the waiter it was granted to (mutex_release.lua) no longer releases it; the
-- grant's token is kept when the ticket is the attempt's.
-- Idempotent: resent after a lost reply, an acquisition that was applied (count is already
-- ARGV[3] + 1) is reported again instead of counted twice; a first acquisition's resend takes a
-- new token (the counter may have moved on since, and the first token never reached anyone).
-- Layout as Redisson: hash field owner -> hold count, PEXPIRE lease on the hash. A key of
-- another type fails with WRONGTYPE (HGET), never reads as "held".
-- The waiter queue (a dlock addition, invisible to Redisson): a caller that finds the lock held
-- and will wait is entered in KEYS[3] scored by when it first arrived (server µs; later attempts
-- keep that place), and KEYS[4] records when its entry goes stale (server time + ARGV[5],
-- renewed by every attempt) and the client to tell ('<ms> <client id>'), so that an unlock
-- can name exactly one live waiter to wake, the longest waiting (mutex_release.lua); it leaves
-- the queue when it acquires.
-- dlock:include fencing
local have = tonumber(ARGV[3])
-- A caller that holds nothing reads its field only when the lock exists: a free lock costs one
-- command. (A key of another type exists, and its HGET fails with WRONGTYPE.)
local present = have ~= 0 or ARGV[7] == '2' or redis.call('exists', KEYS[1]) == 1
local held = 0
if present then
  local field = redis.call('hget', KEYS[1], ARGV[2]) or '0'
  if not string.match(field, '^%d+$') or #field > 9 then
    -- Not a count a client wrote (someone else wrote the field): say so, rather than look held.
    return redis.error_reply('ERR lock field ' .. ARGV[2] .. ' of ' .. KEYS[1] .. ' is not a hold count')
  end
  held = tonumber(field)
end
local ticket = (KEYS[3] and ARGV[4]) or ''
local fenced = ARGV[6] ~= '0'
local token
local claim = false  -- the lock is a hand-off kept for this caller
-- A grant not yet confirmed (the marker): its ticket ('' when unreadable) and token, read only
-- where the caller may be its grantee: confirming, or finding the lock its own already (below).
-- (Inline, not a function: Lua 5.1 creates a script's functions anew on every call.)
local mark_ticket, mark_token
if held ~= 0 and (ARGV[7] == '2' or (held == have + 1 and have == 0)) then
  local mark = redis.call('hget', KEYS[1], 'dlock:grant')
  if mark then
    local t, tok = string.match(mark, '^(%d+) (%d+)$')
    mark_ticket, mark_token = t or '', tonumber(tok or '0')
  end
end
if ARGV[7] == '2' then
  if held == 0 then return {-1, 0} end
  local t, tok = mark_ticket, mark_token
  if t and t ~= ticket then return {-1, held} end
  if t then redis.call('hdel', KEYS[1], 'dlock:grant') end
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {0, tok or 0}
end
if held ~= have and held ~= have + 1 then
  return {-1, held}
end
local busy = held == have and have == 0 and present
local kept = false  -- a hand-off kept for, or granted to, another waiter
if busy then
  local marks = redis.call('hmget', KEYS[1], 'dlock:handoff', 'dlock:grant')
  local kept_for = marks[1]
  if kept_for then
    if kept_for ~= '' and kept_for == ticket and redis.call('hlen', KEYS[1]) == 1 then
      busy, claim = false, true
    else
      kept = true
    end
  elseif marks[2] then
    -- Granted, not yet confirmed: its expiry is the window, not the grantee's lease — a
    -- waiter that slept until then would only find the lock held again. Woken by the next
    -- unlock instead (or its re-check, in case the grantee never comes).
    kept = true
  end
end
if busy then
  if ticket ~= '' then
    -- The queue only speeds wake-ups up: its commands are pcalls, so a queue key of another
    -- type, or OOM refusing the ZADD, never fails the lock (the caller then waits by re-checks).
    local now = redis.call('time')
    local ttl = tonumber(ARGV[5])
    local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
    -- Server µs as digits, from TIME's (a number argument would go through printf's
    -- floating-point path); below 2^53: exact; ties practically never.
    local now_us = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
    local placed
    if ARGV[7] == '1' then
      -- Named, but the lock was taken after all: in front of the head.
      local first = redis.pcall('zrange', KEYS[3], 0, 0, 'WITHSCORES')
      local score = now_us
      if type(first) == 'table' and first[2] then
        score = math.min(tonumber(now_us), tonumber(first[2]) - 1)
      end
      placed = redis.pcall('zadd', KEYS[3], score, ticket)
    else
      placed = redis.pcall('zadd', KEYS[3], 'NX', now_us, ticket)  -- a known waiter keeps its place
    end
    -- Both keys live as long as their longest-lived entry (ARGV[5] passed on as sent: digits).
    local function outlive(key)
      local kttl = redis.pcall('pttl', key)
      if type(kttl) == 'number' and kttl < ttl then redis.pcall('pexpire', key, ARGV[5]) end
    end
    if type(placed) == 'number' then
      outlive(KEYS[3])
      -- '<stale-at ms> <client id>', and for a caller that takes grants '|<mode>|<now ms>|
      -- <ARGV[10]>|<owner>' after the id, without spaces (mutex_release.lua reads them; a
      -- dlock from before grants reads the whole as the id and names the waiter on the lock's
      -- channel instead, rather than dropping the entry as unreadable).
      local entry = digits(now_ms + ttl)
      if ARGV[8] and ARGV[8] ~= '' then
        entry = entry .. ' ' .. ARGV[8]
        if ARGV[9] and ARGV[9] ~= '' and ARGV[10] then
          entry = entry .. '|' .. ARGV[9] .. '|' .. digits(now_ms) .. '|' .. ARGV[10] .. '|' .. ARGV[2]
        end
      end
      if KEYS[4] and type(redis.pcall('hset', KEYS[4], ticket, entry)) == 'number' then
        outlive(KEYS[4])
      end
    end
  end
  if kept then
    -- Not a lease to wait out: the named waiter takes the lock within moments, and this caller
    -- is woken by a later unlock (or re-checks).
    return {-1}
  end
  return {redis.call('pttl', KEYS[1])}
end
-- From here on the script writes. Nothing is written before every key it writes is known to be
-- usable: Redis does not undo a script's earlier writes when a later command fails, so a bad
-- counter must be found before the lock hash is touched (lib/fencing.lua: WRONGTYPE for the
-- advanced counter of another type). A caller that finds the lock held (above), or re-enters,
-- never reads it.
-- A first acquisition that finds the lock its own already: a resend that was applied, or a grant.
local granted, granted_token = nil, nil
if held == have + 1 and have == 0 then
  granted = mark_ticket
  if granted == ticket and ticket ~= '' then granted_token = mark_token end
end
local first = fenced and have == 0 and not granted_token
local last, other_exists = 0, false
if first then
  last, other_exists = fencing_read(KEYS[2], KEYS[5])
  if not last then return other_exists end
end
if claim then
  redis.call('del', KEYS[1])
end
if granted then redis.call('hdel', KEYS[1], 'dlock:grant') end
if held == have + 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])  -- trusted from this send: the lease must start now
else
  redis.call('hincrby', KEYS[1], ARGV[2], '1')  -- a string: a number goes through printf
  redis.call('pexpire', KEYS[1], ARGV[1])
end
token = granted_token or 0
if first then
  local bad
  token, bad = fencing_issue(KEYS[2], KEYS[5], last, other_exists)
  if not token then return bad end
end
-- Out of the queue (see above: never fails the lock). A record goes with its entry (a release
-- that popped the entry deleted it), so a caller that may have queued costs one ZREM, and one
-- whose ticket this is the first attempt of (ARGV[7] '3') none.
if ticket ~= '' and ARGV[7] ~= '3' and redis.pcall('zrem', KEYS[3], ticket) == 1 and KEYS[4] then
  redis.pcall('hdel', KEYS[4], ticket)
end
return {0, token}
