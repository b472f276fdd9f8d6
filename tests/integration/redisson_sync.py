"""Redisson's synchronizers for redisson_client.py (see its usage): RSemaphore,
RPermitExpirableSemaphore and RCountDownLatch, with the waits of SemaphorePubSub and
CountDownLatchPubSub.

Each script below restates, in its own words, the one Redisson sends (RedissonSemaphore,
RedissonPermitExpirableSemaphore, RedissonCountDownLatch, in Redisson's source at 4.7.0 and
after): same keys in the same order, same arguments, replies and messages, and the same commands
inside. The publish command is an argument, as in Redisson: PUBLISH, or SPUBLISH on a Redis >= 7
cluster (where the waiters SSUBSCRIBE). The command-line side is redisson_sync_cli.py.
"""

import os
import time

from redisson_cluster import ShardedPubSub
from redisson_waiting import client_time_ms, prefix_name, suffix_name

# RedissonPermitExpirableSemaphore.nonExpirableTimeout: the deadline of a permit taken with no
# lease; the acquire script never offers it as a time to wait for.
NON_EXPIRABLE_MS = 922337203685477
NEW_COUNT_MESSAGE = "1"  # CountDownLatchPubSub.NEW_COUNT_MESSAGE: closes the local latch
ZERO_COUNT_MESSAGE = "0"  # CountDownLatchPubSub.ZERO_COUNT_MESSAGE: opens it

# --- RSemaphore: the STRING `name` holds the free permits; channel redisson_sc:{name}. ---

# RedissonSemaphore.tryAcquireAsync0. KEYS[1] counter; ARGV[1] permits wanted.
# 1 taken (DECRBY), 0 when the key is missing or holds fewer.
SEM_TRY_ACQUIRE = """
local free = redis.call('get', KEYS[1])
if free == false or tonumber(free) < tonumber(ARGV[1]) then return 0 end
redis.call('decrby', KEYS[1], ARGV[1])
return 1
"""

# RedissonSemaphore.releaseAsync. KEYS[1] counter, KEYS[2] channel; ARGV[1] permits, ARGV[2]
# publish command. Anyone may release; the message is the count after the INCRBY. No reply.
SEM_RELEASE = """
local free = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], free)
"""

# RedissonSemaphore.trySetPermitsAsync (no TTL), and RedissonPermitExpirableSemaphore's, which
# is the same. KEYS[1] counter, KEYS[2] channel; ARGV[1] permits, ARGV[2] publish command.
# 1 set (and the permits published), 0 when the key was already there (nothing sent).
TRY_SET_PERMITS = """
if redis.call('get', KEYS[1]) ~= false then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
"""

# RedissonSemaphore.addPermitsAsync. KEYS[1] counter, KEYS[2] channel; ARGV[1] permits (may be
# negative), ARGV[2] publish command. A missing counter counts as 0; the new count is stored and
# published (so a count that ends at 0 or below publishes a message that wakes nobody).
SEM_ADD_PERMITS = """
local before = redis.call('get', KEYS[1])
if before == false then before = 0 end
local after = before + ARGV[1]
redis.call('set', KEYS[1], after)
redis.call(ARGV[2], KEYS[2], after)
"""

# --- RPermitExpirableSemaphore: the counter `name`, the ZSET {name}:timeout of taken permit
# ids (16 raw bytes each) scored by their deadline (client wall-clock ms, or NON_EXPIRABLE_MS);
# channel redisson_sc:{name}. A permit past its deadline goes back to the counter at the next
# acquire (at most as many as it asks for) or availablePermits (all of them). ---

# RedissonPermitExpirableSemaphore.tryAcquireAsync(ids, timeoutDate). KEYS[1] counter, KEYS[2]
# deadline zset, KEYS[3] channel; ARGV[1] permits wanted, ARGV[2] their deadline, ARGV[3] client
# time ms, ARGV[4] NON_EXPIRABLE_MS, ARGV[5] publish command, ARGV[6..] the new ids (raw).
# 'OK' taken (the zset then lives as long as the counter, if that has a TTL); else ':<deadline>'
# of the permit due first, unless none is held or the first never expires: nil.
PERMIT_TRY_ACQUIRE = """
local lapsed = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #lapsed > 0 then
  redis.call('zrem', KEYS[2], unpack(lapsed))
  local back = redis.call('incrby', KEYS[1], #lapsed)
  if tonumber(back) > 0 then redis.call(ARGV[5], KEYS[3], back) end
end
local free = redis.call('get', KEYS[1])
if free ~= false and tonumber(free) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  local counter_ttl = redis.call('pttl', KEYS[1])
  if counter_ttl > 0 then redis.call('pexpire', KEYS[2], counter_ttl) end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] == nil or first[2] == ARGV[4] then return nil end
return ':' .. tostring(first[2])
"""

# RedissonPermitExpirableSemaphore.tryReleaseAsync(id). KEYS[1] counter, KEYS[2] channel,
# KEYS[3] deadline zset; ARGV[1] id (raw), ARGV[2] 1, ARGV[3] client time ms, ARGV[4] publish
# command. An id no longer in the zset (released, or reclaimed once lapsed) answers 0 and
# changes nothing; one still there goes back to the counter, whose new count is published, and
# the answer is 0 if its deadline had passed, else 1.
PERMIT_TRY_RELEASE = """
local due = redis.call('zscore', KEYS[3], ARGV[1])
if tonumber(redis.call('zrem', KEYS[3], ARGV[1])) ~= 1 then return 0 end
local free = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], free)
if tonumber(due) <= tonumber(ARGV[3]) then return 0 end
return 1
"""

# RedissonPermitExpirableSemaphore.availablePermitsAsync. KEYS[1] counter, KEYS[2] deadline
# zset, KEYS[3] channel; ARGV[1] client time ms, ARGV[2] publish command. Every lapsed permit
# goes back first (the new count published if positive, and answered); else the counter as
# stored (a bulk string), or 0 when missing.
PERMIT_AVAILABLE = """
local lapsed = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #lapsed > 0 then
  redis.call('zrem', KEYS[2], unpack(lapsed))
  local back = redis.call('incrby', KEYS[1], #lapsed)
  if tonumber(back) > 0 then redis.call(ARGV[2], KEYS[3], back) end
  return back
end
local free = redis.call('get', KEYS[1])
if free == false then return 0 end
return free
"""

# RedissonPermitExpirableSemaphore.addPermitsAsync. KEYS[1] counter, KEYS[2] channel; ARGV[1]
# permits (may be negative), ARGV[2] publish command. Unlike RSemaphore's, the message is the
# number added, and only when it is positive.
PERMIT_ADD_PERMITS = """
local before = redis.call('get', KEYS[1])
if before == false then before = 0 end
redis.call('set', KEYS[1], tonumber(before) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
"""

# --- RCountDownLatch: the STRING `name` holds the count; channel
# redisson_countdownlatch__channel__{name} (braces always, whatever the name). ---

# RedissonCountDownLatch.trySetCountAsync. KEYS[1] count, KEYS[2] channel; ARGV[1] the message
# (NEW_COUNT_MESSAGE), ARGV[2] count, ARGV[3] publish command. 1 set (and `1` sent), 0 when a
# count is already there.
LATCH_TRY_SET_COUNT = """
if redis.call('exists', KEYS[1]) ~= 0 then return 0 end
redis.call('set', KEYS[1], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
"""

# RedissonCountDownLatch.countDownAsync. KEYS[1] count, KEYS[2] channel; ARGV[1] the message
# (ZERO_COUNT_MESSAGE), ARGV[2] publish command. DECR; at 0 or below the key goes; `0` is sent
# only by the count down that reaches exactly 0 (one on a missing key leaves -1: deleted, silent).
LATCH_COUNT_DOWN = """
local left = redis.call('decr', KEYS[1])
if left <= 0 then redis.call('del', KEYS[1]) end
if left == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
"""


def as_int(data):
    """A message as LongCodec reads it; None when it is no number."""
    try:
        return int(data)
    except (TypeError, ValueError):
        return None


class SyncObject:
    """What the three share: the connection (a redis.Redis, or a ClusterClient that sends each
    command to its key's slot master), the name, the channel and the publish command."""

    def __init__(self, conn, name, channel, cluster=False):
        self.conn = conn
        self.name = name
        self.channel = channel
        self.cluster = cluster
        self.publish = "spublish" if cluster else "publish"

    def command(self, *args):
        """A plain command on the name's node."""
        if self.cluster:
            return self.conn.execute(self.name, *args)
        return self.conn.execute_command(*args)

    def eval(self, script, keys, *args):
        return self.conn.eval(script, len(keys), *keys, *args)

    def new_pubsub(self):
        """A pub/sub connection for waits: redis-py's, or sharded on a cluster."""
        if self.cluster:
            return ShardedPubSub(self.conn)
        return self.conn.pubsub(ignore_subscribe_messages=False)

    def subscribe(self, pubsub, deadline):
        """PublishSubscribe.subscribe, waited for: True once the server confirmed the channel
        (anything before that, from an earlier subscription, is not for this wait); False if
        `deadline` (time.monotonic()) came first."""
        pubsub.subscribe(self.channel)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            m = pubsub.get_message(timeout=left)
            if m is not None and m["type"] == "subscribe" and m["channel"] == self.channel:
                return True

    def message_value(self, m):
        """The number a message on this object's channel carries, else None."""
        if m is None or m["type"] != "message" or m["channel"] != self.channel:
            return None
        return as_int(m["data"])


class SemaphoreWait(SyncObject):
    """acquire() of both semaphores: try; else subscribe, and loop trying and waiting for a
    permit of the local latch (RedissonLockEntry's java.util.concurrent.Semaphore), which
    SemaphorePubSub releases min(local waiters, message value) times per message: this process
    waits once at a time, so a positive value gives one permit and 0 or less none. A permit not
    taken by the wait it came during stays for the next (queued messages). A subclass defines
    attempt(): (the acquired id, None) or (None, ms to wait at most: None for no bound)."""

    def acquire(self, timeout_s, on_waiting=None, pubsub=None):
        """The acquired id, or None when timeout_s passed first. With `pubsub` (kept by the
        caller, as Redisson keeps its pub/sub connections) the channel is unsubscribed when the
        wait ends without waiting for the confirmation; else the connection is closed."""
        deadline = time.monotonic() + timeout_s
        got, _ = self.attempt()
        if got is not None:
            return got
        own = pubsub is None
        if own:
            pubsub = self.new_pubsub()
        try:
            if not self.subscribe(pubsub, deadline):
                return None
            first = True
            while True:
                got, bound_ms = self.attempt()
                if got is not None:
                    return got
                if first and on_waiting is not None:
                    on_waiting()
                first = False
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.take_permit(pubsub, left if bound_ms is None else min(left, bound_ms / 1000.0))
        finally:
            if own:
                pubsub.close()
            else:
                pubsub.unsubscribe(self.channel)

    def take_permit(self, pubsub, wait_s):
        """latch.tryAcquire(wait) (acquire() when unbounded: wait_s is then what --timeout-s
        leaves): True when a positive message came (or had come) within wait_s; a wait of 0 or
        less takes only what already arrived."""
        end = time.monotonic() + max(wait_s, 0)
        while True:
            m = pubsub.get_message(timeout=max(end - time.monotonic(), 0))
            if m is not None:
                value = self.message_value(m)
                if value is not None and value > 0:
                    return True
                continue
            if time.monotonic() >= end:
                return False


class Semaphore(SemaphoreWait):
    """RSemaphore (getSemaphore). Its permits carry no id: acquire() gives "-"."""

    def __init__(self, conn, name, cluster=False):
        super().__init__(conn, name, prefix_name("redisson_sc", name), cluster)

    def attempt(self):
        if self.eval(SEM_TRY_ACQUIRE, [self.name], 1) == 1:
            return "-", None
        return None, None

    def release(self, permits=1):
        """release(n); Redisson sends nothing for 0."""
        if permits != 0:
            self.eval(SEM_RELEASE, [self.name, self.channel], permits, self.publish)

    def give_back(self, _id):
        """What `hold` prints after the release: RSemaphore.release() answers nothing."""
        self.release(1)
        return 1

    def try_set_permits(self, permits):
        return self.eval(TRY_SET_PERMITS, [self.name, self.channel], permits, self.publish)

    def add_permits(self, permits):
        self.eval(SEM_ADD_PERMITS, [self.name, self.channel], permits, self.publish)

    def available(self):
        """availablePermits: a GET, 0 when missing."""
        value = self.command("GET", self.name)
        return 0 if value is None else int(value)


class PermitSemaphore(SemaphoreWait):
    """RPermitExpirableSemaphore (getPermitExpirableSemaphore). `lease_ms` is acquire()'s
    leaseTime (None: acquire() with none, the permit never expires); each attempt dates its
    permit from the client's clock, as calcTimeout does. Ids print as 32 lowercase hex digits
    (ByteBufUtil.hexDump) and go to Redis as their 16 raw bytes (decodeHexDump)."""

    def __init__(self, conn, name, cluster=False, lease_ms=None):
        super().__init__(conn, name, prefix_name("redisson_sc", name), cluster)
        self.timeouts = suffix_name(name, "timeout")
        self.lease_ms = lease_ms

    def attempt(self):
        """One tryAcquire of one permit with a fresh id (ServiceManager.generateId): (hex id,
        None), or (None, ms until the first permit's deadline: wait at most that), or (None,
        None): wait for a message only."""
        permit = os.urandom(16)
        due = NON_EXPIRABLE_MS if self.lease_ms is None else client_time_ms() + self.lease_ms
        reply = self.eval(PERMIT_TRY_ACQUIRE, [self.name, self.timeouts, self.channel], 1, due,
                          client_time_ms(), NON_EXPIRABLE_MS, self.publish, permit)
        if reply == "OK":
            return permit.hex(), None
        if reply is None:
            return None, None
        return None, int(reply[1:]) - client_time_ms()

    def try_release(self, hex_id):
        """tryRelease(id): 1, or 0 (unknown, already released or reclaimed, or past its
        deadline: then it goes back all the same)."""
        return self.eval(PERMIT_TRY_RELEASE, [self.name, self.channel, self.timeouts],
                         bytes.fromhex(hex_id), 1, client_time_ms(), self.publish)

    def give_back(self, hex_id):
        return self.try_release(hex_id)

    def try_set_permits(self, permits):
        return self.eval(TRY_SET_PERMITS, [self.name, self.channel], permits, self.publish)

    def add_permits(self, permits):
        self.eval(PERMIT_ADD_PERMITS, [self.name, self.channel], permits, self.publish)

    def available(self):
        return int(self.eval(PERMIT_AVAILABLE, [self.name, self.timeouts, self.channel],
                             client_time_ms(), self.publish))


class CountDownLatch(SyncObject):
    """RCountDownLatch (getCountDownLatch)."""

    def __init__(self, conn, name, cluster=False):
        super().__init__(conn, name, "redisson_countdownlatch__channel__{" + name + "}", cluster)

    def try_set_count(self, count):
        return self.eval(LATCH_TRY_SET_COUNT, [self.name, self.channel], NEW_COUNT_MESSAGE,
                         count, self.publish)

    def count_down(self):
        self.eval(LATCH_COUNT_DOWN, [self.name, self.channel], ZERO_COUNT_MESSAGE, self.publish)

    def count(self):
        """getCount: a GET, 0 when missing."""
        value = self.command("GET", self.name)
        return 0 if value is None else int(value)

    def wait_open(self, timeout_s, on_waiting=None):
        """await(): at once if the count is 0; else subscribe, and while the count is above 0
        wait on the local latch (a ReclosableLatch, closed at first), which `0` opens and `1`
        closes, and which stays as the last message left it (so an open latch with a count
        above 0 makes Redisson's waiter read the count again at once). True when the count was
        seen at 0; False when timeout_s (not Redisson's: await() has no bound) passed first.
        on_waiting() is called once, subscribed, after the first count above 0."""
        deadline = time.monotonic() + timeout_s
        if self.count() == 0:
            return True
        pubsub = self.new_pubsub()
        try:
            if not self.subscribe(pubsub, deadline):
                return False
            opened = False
            first = True
            while self.count() > 0:
                if first and on_waiting is not None:
                    on_waiting()
                first = False
                # latch.await(): the messages that have come are applied in order; then it
                # returns if open, else blocks until a message opens it.
                while True:
                    left = deadline - time.monotonic()
                    m = pubsub.get_message(timeout=0 if opened else max(left, 0))
                    value = self.message_value(m)
                    if value == 0:
                        opened = True
                    elif value == 1:
                        opened = False
                    if m is None:
                        if opened:
                            break
                        if time.monotonic() >= deadline:
                            return False
            return True
        finally:
            pubsub.close()
