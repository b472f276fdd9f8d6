"""The rest of Redisson's lock family for redisson_client.py (see its usage): RFairLock and the
two sides of RReadWriteLock, waiting as RLock does (redisson_waiting.PubSubLock).

Each script below restates, in its own words, the one Redisson sends (RedissonFairLock,
RedissonReadLock, RedissonWriteLock, in Redisson's source at 4.7.0 and after): same keys,
arguments, replies and messages. Redisson's newer unlock latch key
(`redisson_unlock_latch:{name}:<id>`, which makes a retried unlock idempotent) is left out, as
in redisson_client.RLock: it is internal to Redisson and nothing else reads it. No watchdog
renewal is done: a hold must end before its lease.
"""

from redisson_waiting import (FAIR_LOCK_WAIT_TIMEOUT_MS, READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE,
                              PubSubLock, client_time_ms, new_owner, prefix_name, suffix_name)

# RedissonFairLock.tryLockInnerAsync (the TTL form).
# KEYS[1] lock hash, KEYS[2] queue list, KEYS[3] deadline zset; ARGV[1] lease ms, ARGV[2] owner,
# ARGV[3] wait ms (fairLockWaitTimeout), ARGV[4] client time ms.
# Returns nil when acquired (or re-entered); else a TTL in ms to wait for the head's message.
FAIR_TRY_LOCK = """
local now = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local due = redis.call('zscore', KEYS[3], head)
  if due == false or tonumber(due) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0
    or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiter)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local tail = redis.call('lindex', KEYS[2], -1)
local tail_due = false
if tail ~= false and tail ~= ARGV[2] then tail_due = redis.call('zscore', KEYS[3], tail) end
local ttl
if tail_due ~= false then
  ttl = tonumber(tail_due) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + now, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
"""

# RedissonFairLock.acquireFailedAsync: a wait that ended leaves the queue, and those behind it
# get its wait back. KEYS[1] queue list, KEYS[2] deadline zset; ARGV[1] owner, ARGV[2] wait ms.
FAIR_ACQUIRE_FAILED = """
local queue = redis.call('lrange', KEYS[1], 0, -1)
local behind = false
for _, waiter in ipairs(queue) do
  if behind then
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), waiter)
  elseif waiter == ARGV[1] then
    behind = true
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
"""

# RedissonFairLock.unlockInnerAsync. KEYS[1] lock hash, KEYS[2] queue list, KEYS[3] deadline
# zset, KEYS[4] channel prefix (the head's channel is KEYS[4]:<head>); ARGV[1] message (0),
# ARGV[2] lease ms, ARGV[3] owner, ARGV[4] client time ms, ARGV[5] publish command.
# Returns 1 freed (or already gone: the head is told anyway), 0 still held, nil not the owner.
FAIR_UNLOCK = """
local now = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local due = redis.call('zscore', KEYS[3], head)
  if due == false or tonumber(due) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
local function tell_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1]) end
end
if redis.call('exists', KEYS[1]) == 0 then
  tell_head()
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
tell_head()
return 1
"""


class FairLock(PubSubLock):
    """RFairLock (getFairLock): the lock hash, a FIFO of waiting owners and their deadlines;
    an unlock wakes only the head, on its own channel. `wait_ms` is fairLockWaitTimeout (what
    lock() passes; tryLock(wait) passes its wait instead)."""

    def __init__(self, conn, name, lease_ms, cluster=False, wait_ms=FAIR_LOCK_WAIT_TIMEOUT_MS,
                 owner=None):
        super().__init__(conn, name, lease_ms, cluster)
        self.wait_ms = wait_ms
        self.owner = owner or new_owner()
        self.queue = prefix_name("redisson_lock_queue", name)
        self.timeouts = prefix_name("redisson_lock_timeout", name)
        self.channel_prefix = prefix_name("redisson_lock__channel", name)
        self.channel = self.channel_prefix + ":" + self.owner  # this waiter's own channel

    def try_acquire(self):
        return self.conn.eval(FAIR_TRY_LOCK, 3, self.name, self.queue, self.timeouts,
                              self.lease_ms, self.owner, self.wait_ms, client_time_ms())

    def acquire_failed(self):
        self.conn.eval(FAIR_ACQUIRE_FAILED, 2, self.queue, self.timeouts, self.owner,
                       self.wait_ms)

    def unlock(self):
        return self.conn.eval(FAIR_UNLOCK, 4, self.name, self.queue, self.timeouts,
                              self.channel_prefix, UNLOCK_MESSAGE, self.lease_ms, self.owner,
                              client_time_ms(), self.publish)


# RedissonReadLock.tryLockInnerAsync. KEYS[1] hash, KEYS[2] this owner's hold-key prefix
# (`{name}:<owner>:rwlock_timeout`); ARGV[1] lease ms, ARGV[2] owner, ARGV[3] <owner>:write.
# Each read hold n gets its own key KEYS[2]:n carrying its lease. nil acquired, else the PTTL.
READ_TRY_LOCK = """
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
"""

# RedissonReadLock.unlockInnerAsync. KEYS[1] hash, KEYS[2] channel, KEYS[3] this owner's
# hold-key prefix, KEYS[4] the prefix before `:<owner>` (`{name}`); ARGV[1] message (0),
# ARGV[2] owner, ARGV[3] publish command. Drops this owner's newest hold key; while holds with
# time left remain the hash lives as long as the longest (0), else it goes and `0` is sent (1).
# nil: not held by this owner (a lock already gone still gets its `0`).
READ_UNLOCK = """
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (left + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local holds = tonumber(redis.call('hget', KEYS[1], field))
    if type(holds) == 'number' then
      for n = holds, 1, -1 do
        local key = KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. n
        longest = math.max(longest, redis.call('pttl', key))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return 0
  end
  if mode == 'write' then return 0 end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
"""

# RedissonWriteLock.tryLockInnerAsync. KEYS[1] hash; ARGV[1] lease ms, ARGV[2] <owner>:write.
# A re-entry adds the lease to the PTTL. nil acquired, else the PTTL (also when this owner
# holds only the read side: an upgrade waits for itself).
WRITE_TRY_LOCK = """
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])
"""

# RedissonWriteLock.unlockInnerAsync. KEYS[1] hash, KEYS[2] channel; ARGV[1] message (1),
# ARGV[2] lease ms, ARGV[3] <owner>:write, ARGV[4] publish command. The last release deletes the
# hash and sends `1` (wakes every waiter) when `mode` is all that is left; with read holds of
# the same owner left it turns the lock into a read lock, sending nothing. 1 released, 0 still
# held, nil not held (a lock already gone still gets its `1`).
WRITE_UNLOCK = """
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
"""


class ReadLock(PubSubLock):
    """RReadWriteLock.readLock(): shared; `owner` is `<uuid>:<thread>` (the writer side of the
    same thread is `<owner>:write`)."""

    def __init__(self, conn, name, lease_ms, cluster=False, owner=None):
        super().__init__(conn, name, lease_ms, cluster)
        self.owner = owner or new_owner()
        self.channel = prefix_name("redisson_rwlock", name)
        # getReadWriteTimeoutNamePrefix, and getKeyPrefix (the part before `:<owner>`).
        self.hold_prefix = suffix_name(name, self.owner) + ":rwlock_timeout"
        self.key_prefix = self.hold_prefix.split(":" + self.owner)[0]

    def hold_key(self, n):
        """The key of this owner's n-th read hold (1-based)."""
        return self.hold_prefix + ":" + str(n)

    def try_acquire(self):
        return self.conn.eval(READ_TRY_LOCK, 2, self.name, self.hold_prefix, self.lease_ms,
                              self.owner, self.owner + ":write")

    def unlock(self):
        return self.conn.eval(READ_UNLOCK, 4, self.name, self.channel, self.hold_prefix,
                              self.key_prefix, UNLOCK_MESSAGE, self.owner, self.publish)


class WriteLock(PubSubLock):
    """RReadWriteLock.writeLock(): exclusive; `owner` is the hash field, `<uuid>:<thread>:write`
    (RedissonWriteLock.getLockName)."""

    def __init__(self, conn, name, lease_ms, cluster=False, owner=None):
        super().__init__(conn, name, lease_ms, cluster)
        self.owner = (owner or new_owner()) + ":write"
        self.channel = prefix_name("redisson_rwlock", name)

    def try_acquire(self):
        return self.conn.eval(WRITE_TRY_LOCK, 1, self.name, self.lease_ms, self.owner)

    def unlock(self):
        return self.conn.eval(WRITE_UNLOCK, 2, self.name, self.channel, READ_UNLOCK_MESSAGE,
                              self.lease_ms, self.owner, self.publish)
