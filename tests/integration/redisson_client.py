#!/usr/bin/env python3
"""An independent client of Redisson's lock protocols, for dlock's interoperability tests.

It speaks the wire protocol exactly as Redisson's RedissonLock does (tryLockInnerAsync,
unlockInnerAsync and the LockPubSub wait), written from the Lua scripts Redisson sends, with
none of dlock's code: the lock is a hash at the lock's name whose field `<uuid>:<threadId>`
counts the holds, with a PEXPIRE lease; an unlock at zero deletes it and publishes "0" on
`redisson_lock__channel:{name}`; a waiter subscribes to that channel first, then tries, and
waits for a message for at most the remaining TTL before trying again.

With --kind it speaks another lock of the family instead (redisson_family.py, next to this
file), waiting the same way (redisson_waiting.py, which RLock below uses too):
  mutex  RLock, as above (the default);
  fair   RFairLock: the same hash, plus the FIFO list `redisson_lock_queue:{name}` and the
         deadline zset `redisson_lock_timeout:{name}` (client wall-clock ms); a waiter queues,
         subscribes to its own channel `redisson_lock__channel:{name}:<owner>`, and an unlock
         publishes "0" to the queue's head only. A wait that gives up (--timeout-s, the end of
         a loop) leaves the queue and gives its wait back to those behind, as tryLock does.
         --fair-wait-ms N is the wait each waiter adds to the queue (default 300000,
         Redisson's fairLockWaitTimeout);
  read   RReadWriteLock.readLock(): the hash `name` with `mode` read|write and a field per
         reader `<owner>`, one key per read hold `{name}:<owner>:rwlock_timeout:<n>` with its
         own lease; channel `redisson_rwlock:{name}`, where the unlock that frees the lock
         publishes "0";
  write  RReadWriteLock.writeLock(): the same hash, field `<owner>:write` (the owner printed);
         its last unlock publishes "1" on `redisson_rwlock:{name}` (wakes every waiter).

Usage (Debian's python3-redis):
  redisson_client.py hold URL NAME
      acquire (blocking), print "acquired <owner>"; hold until a line or EOF on stdin; unlock,
      print "released <unlock script result>".
  redisson_client.py acquire_wait URL NAME
      try once; if held, print "waiting <pttl>" (subscribed by then) and wait through pub/sub;
      once acquired print "acquired <ms waited> <owner>", unlock, print "released <result>".
  redisson_client.py loop URL NAME [--hold-ms N] [--pause-ms N] [--duration-s N] [--log FILE]
                    [--log-asks FILE]
      prints "ready" once connected and waits for EOF on stdin (so that several processes start
      together); then for N seconds (default 6): lock() as above (the wait's subscription ends
      with it, as Redisson unsubscribes once its waiter stops waiting; a wait still on at the
      end gives up), hold N ms (default 1), unlock, pause N ms (default 0: the next lock()
      follows the unlock at once). With --log, appends "<start ns> <end ns>" (CLOCK_MONOTONIC,
      inside the hold) per acquisition to FILE. Prints "count <acquisitions>", "max_lock_ms
      <longest lock()>", "wakes <unlock messages that woke a wait>", "wake_wins <of them, the
      next attempt acquired>", "ttl_expiries <waits that ended by the TTL, no message>",
      "bad_messages <messages other than 0/1 on the channel>", "max_wake_to_attempt_us
      <longest delay from such a message to the next attempt>". With --log-asks FILE, appends
      "<sent ns> <answered ns> <queued> <start ns>" per acquisition: the CLOCK_MONOTONIC ns
      before and after lock()'s first attempt, 1 if that attempt failed (for --kind fair, it
      joined the queue in between) else 0, and the hold's start as in --log.
Options (anywhere): --lease-ms N (default 30000, Redisson's lockWatchdogTimeout; no renewal is
done, so a hold must end before it), --timeout-s N (give up waiting: exit 3), --stamp
(acquire_wait: the acquired line ends with the CLOCK_MONOTONIC ns at which lock() returned),
--cluster (URL is one node of a Redis Cluster), --kind mutex|fair|read|write (above; and
semaphore|permits|latch, below, where --lease-ms is the permits' lease, none by default),
--fair-wait-ms N (--kind fair only). An unlock that finds the lock not held by this owner (the
script answers nil) is an error (exit 3); RFairLock's answers 1 when the lock is already gone
(after telling the queue's head), as Redisson's does. With a --kind other than mutex, loop
also prints "zero_ttl_retries <attempts answered with a TTL of 0: retried at once>" (a fair
waiter behind a head that has not yet taken the free lock; Redisson's waiter busy-loops then).
Every line is flushed; errors go to stderr with a non-zero exit.

Cluster mode (a `redis+cluster://host:port,host:port...` URL, or --cluster with a redis:// URL of
one node; any --kind), as Redisson runs on a Redis >= 7 cluster: the scripts go to the master of
the lock name's slot (following MOVED and ASK, retrying through a failover), the unlock script
sends its message with SPUBLISH instead of PUBLISH (every key and channel of a lock shares its
name's slot), and a waiter SSUBSCRIBEs to the channel on that master (sharded pub/sub, spoken
over a socket of its own: python3-redis 4.3 has none). The waiting is the same: wake on `0`/`1`
only, else after the lock's TTL. A subscription that the server ends (the slot moved) or whose
connection drops is made again on the slot's master.
That part lives in redisson_cluster.py, next to this file.

Redisson's synchronizers (redisson_sync.py and redisson_sync_cli.py, next to this file):
  --kind semaphore  RSemaphore: the STRING `name` holds the free permits; channel
         `redisson_sc:{name}` (`redisson_sc:name` if the name has a `{`, as for every channel
         and key below but the latch's channel). An acquire takes one (DECRBY) if there is
         one; a release (by anyone) INCRBYs and publishes the new count. A waiter subscribes,
         then tries again each time a message with a positive value comes (SemaphorePubSub:
         `0` wakes nobody), with no other bound. The permit id printed is `-`. --lease-ms is
         ignored.
  --kind permits    RPermitExpirableSemaphore: the same counter and channel, plus the ZSET
         `{name}:timeout` (`name:timeout`) of taken permits: 16 random bytes, sent and stored
         raw (printed as 32 hex digits), scored by their deadline (client wall-clock ms now +
         --lease-ms, or 922337203685477 for "never" when --lease-ms is not given). An acquire
         first puts one lapsed permit back (publishing the count if positive); a failed one
         answers the first deadline, and the waiter waits for a message at most until then
         (never-expiring permits: no bound). A release (tryRelease) puts the permit back and
         publishes the count; it answers 1, or 0 if the permit had lapsed (it still goes back,
         once) or was already gone (nothing changes).
  --kind latch      RCountDownLatch: the STRING `name` holds the count; channel
         `redisson_countdownlatch__channel__{name}` (braces always). trySetCount publishes `1`,
         the count down that reaches 0 deletes the key and publishes `0`; await() subscribes
         and, while the count is above 0, waits until a `0` opens its latch.
  redisson_client.py --kind semaphore|permits hold URL NAME
      acquire one permit (blocking), print "acquired <id>"; hold until a line or EOF on stdin;
      release, print "released <r>" (semaphore: 1; permits: tryRelease's 1 or 0).
  redisson_client.py --kind semaphore|permits acquire_wait URL NAME
      try once; if none is free, print "waiting" (subscribed by then) and wait as above; then
      print "acquired <ms waited> <id>", release, print "released <r>".
  redisson_client.py --kind semaphore|permits loop URL NAME [--hold-ms N] [--pause-ms N]
                    [--duration-s N] [--log FILE]
      as the lock loop: "ready", EOF on stdin, then for N s acquire one permit, hold, release,
      pause (--log: "<start ns> <end ns>" per hold); prints "count <acquisitions>".
  redisson_client.py --kind semaphore|permits set_permits URL NAME N
      trySetPermits(N): sets the count if there is none, publishing N; prints 1 or 0.
  redisson_client.py --kind semaphore|permits add_permits URL NAME N
      addPermits(N), N may be negative; prints "ok". Semaphore publishes the new count,
      permits publishes N if N > 0.
  redisson_client.py --kind semaphore|permits available URL NAME
      availablePermits(); for permits every lapsed permit goes back first. Prints the number.
  redisson_client.py --kind semaphore release URL NAME N
      release(N) (N >= 0; 0 sends nothing); prints "ok".
  redisson_client.py --kind permits release_id URL NAME HEXID
      tryRelease(HEXID); prints 1 or 0.
  redisson_client.py --kind latch latch_set URL NAME N     trySetCount(N); prints 1 or 0.
  redisson_client.py --kind latch count_down URL NAME      countDown(); prints "ok".
  redisson_client.py --kind latch count URL NAME           getCount(); prints it (0 if none).
  redisson_client.py --kind latch await URL NAME
      await(): at once if the count is 0; else subscribe, print "waiting" (once, while the
      count is above 0), and wait for `0`; then print "opened <ms waited>".
  --timeout-s N ends any wait (exit 3), --stamp ends the "acquired"/"opened" line with the
  CLOCK_MONOTONIC ns at which the wait returned, cluster mode works as for the locks
  (SPUBLISH, SSUBSCRIBE; a latch whose name has a `{` has its channel in another slot, so
  its scripts fail with CROSSSLOT there, as Redisson's do); --fair-wait-ms and --log-asks
  are for the lock kinds only.
"""

import sys
import time
import types

try:
    import redis
except ImportError:  # pragma: no cover - reported to the test as a clear failure
    sys.stderr.write("redisson_client.py: the 'redis' module is missing "
                     "(apt-get install python3-redis)\n")
    sys.exit(4)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree for the modules below
from redisson_cluster import CLUSTER_SCHEME, connect_cluster  # noqa: E402
from redisson_family import FairLock, ReadLock, WriteLock  # noqa: E402
from redisson_sync_cli import SYNC_KINDS, run as run_sync  # noqa: E402
from redisson_waiting import (FAIR_LOCK_WAIT_TIMEOUT_MS, LOCK_WATCHDOG_TIMEOUT_MS,  # noqa: E402
                              UNLOCK_MESSAGE, PubSubLock, new_owner, prefix_name)

KINDS = ("mutex", "fair", "read", "write") + SYNC_KINDS

# RedissonLock.tryLockInnerAsync: nil when acquired (or re-entered), else the PTTL.
TRY_LOCK = (
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "return redis.call('pttl', KEYS[1]);"
)

# RedissonLock.unlockInnerAsync: nil if not the owner, 0 if still held (re-entered), 1 freed.
UNLOCK = (
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; "
    "else "
    "redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; "
    "end; "
    "return nil;"
)

# The same on a Redis >= 7 cluster, where Redisson's publish command is SPUBLISH (sharded pub/sub:
# the message stays on the slot's shard, where the waiters SSUBSCRIBE).
UNLOCK_SHARDED = UNLOCK.replace("redis.call('publish',", "redis.call('spublish',")
assert UNLOCK_SHARDED != UNLOCK


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def die(code, message):
    sys.stderr.write("redisson_client.py: " + message + "\n")
    sys.stderr.flush()
    sys.exit(code)


class RLock(PubSubLock):
    """RLock (getLock): the lock hash alone; an unlock wakes the waiters of every process."""

    def __init__(self, conn, name, lease_ms, cluster=False):
        super().__init__(conn, name, lease_ms, cluster)
        self.channel = prefix_name("redisson_lock__channel", name)
        self.owner = new_owner()

    def try_acquire(self):
        """None when acquired, else the lock's PTTL in ms."""
        return self.conn.eval(TRY_LOCK, 1, self.name, self.lease_ms, self.owner)

    def unlock(self):
        """The script's reply (None: not the owner)."""
        script = UNLOCK_SHARDED if self.cluster else UNLOCK
        return self.conn.eval(script, 2, self.name, self.channel, UNLOCK_MESSAGE,
                              self.lease_ms, self.owner)


def unlock(lock):
    result = lock.unlock()
    if result is None:
        die(3, "unlock: not locked by this owner (" + lock.owner + ")")
    return result


def loop(lock, hold_ms, pause_ms, duration_s, log_path, asks_path=None):
    """lock(), hold, unlock() until duration_s passed; prints the counts (see the usage)."""
    # Redisson keeps its pub/sub connections; one for this process's waits.
    pubsub = lock.new_pubsub()
    stats = {"wakes": 0, "wake_wins": 0, "ttl_expiries": 0, "bad_messages": 0,
             "max_wake_to_attempt_us": 0, "zero_ttl_retries": 0}
    holds = []
    asks = []
    longest = 0.0
    lock.conn.ping()  # connected
    say("ready")
    sys.stdin.read()  # EOF: go (several processes start together)
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        asked = time.monotonic()
        if not lock.lock(max(end - asked, 0.001), pubsub=pubsub, stats=stats):
            break  # still waiting when the run ended
        longest = max(longest, time.monotonic() - asked)
        start = time.monotonic_ns()
        time.sleep(hold_ms / 1000.0)
        holds.append((start, time.monotonic_ns()))
        asks.append(lock.ask[:2] + (int(lock.ask[2]), start))
        unlock(lock)
        if pause_ms > 0:
            time.sleep(pause_ms / 1000.0)
    pubsub.close()
    if log_path:
        with open(log_path, "a") as f:
            f.write("".join("%d %d\n" % h for h in holds))
    if asks_path:
        with open(asks_path, "a") as f:
            f.write("".join("%d %d %d %d\n" % a for a in asks))
    say("count " + str(len(holds)))
    say("max_lock_ms " + str(int(longest * 1000)))
    for key in ("wakes", "wake_wins", "ttl_expiries", "bad_messages", "max_wake_to_attempt_us"):
        say(key + " " + str(stats[key]))
    if not isinstance(lock, RLock):
        say("zero_ttl_retries " + str(stats["zero_ttl_retries"]))
    return 0


def make_lock(kind, conn, name, lease_ms, cluster, fair_wait_ms):
    if kind == "fair":
        return FairLock(conn, name, lease_ms, cluster, fair_wait_ms)
    if kind == "read":
        return ReadLock(conn, name, lease_ms, cluster)
    if kind == "write":
        return WriteLock(conn, name, lease_ms, cluster)
    return RLock(conn, name, lease_ms, cluster)


def connect(url, cluster):
    if cluster:
        return connect_cluster(url)
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)


def main(argv):
    lease_ms = None  # the locks' default is LOCK_WATCHDOG_TIMEOUT_MS; permits: never expire
    kind = "mutex"
    fair_wait_ms = None
    timeout_s = 60.0
    stamp = False
    hold_ms = 1.0
    pause_ms = 0.0
    duration_s = 6.0
    log_path = None
    asks_path = None
    cluster = False
    args = []
    rest = list(argv[1:])
    while rest:
        opt = rest.pop(0)
        if not opt.startswith("--"):
            args.append(opt)
            continue
        if opt == "--stamp":
            stamp = True
            continue
        if opt == "--cluster":
            cluster = True
            continue
        if not rest:
            die(2, "missing value for " + opt)
        if opt == "--lease-ms":
            lease_ms = int(rest.pop(0))
        elif opt == "--timeout-s":
            timeout_s = float(rest.pop(0))
        elif opt == "--hold-ms":
            hold_ms = float(rest.pop(0))
        elif opt == "--pause-ms":
            pause_ms = float(rest.pop(0))
        elif opt == "--duration-s":
            duration_s = float(rest.pop(0))
        elif opt == "--log":
            log_path = rest.pop(0)
        elif opt == "--log-asks":
            asks_path = rest.pop(0)
        elif opt == "--kind":
            kind = rest.pop(0)
            if kind not in KINDS:
                die(2, "--kind must be one of " + "|".join(KINDS) + ", not " + kind)
        elif opt == "--fair-wait-ms":
            fair_wait_ms = int(rest.pop(0))
        else:
            die(2, "unknown option " + opt)
    if fair_wait_ms is not None and kind != "fair":
        die(2, "--fair-wait-ms is for --kind fair only")
    if kind in SYNC_KINDS:
        if asks_path is not None:
            die(2, "--log-asks is for the lock kinds only")
        cluster = cluster or (len(args) > 1 and args[1].startswith(CLUSTER_SCHEME))
        opts = types.SimpleNamespace(lease_ms=lease_ms, timeout_s=timeout_s, stamp=stamp,
                                     hold_ms=hold_ms, pause_ms=pause_ms, duration_s=duration_s,
                                     log_path=log_path, cluster=cluster)
        return run_sync(kind, args, opts, lambda url: connect(url, cluster), say, die)
    if len(args) != 3 or args[0] not in ("hold", "acquire_wait", "loop"):
        die(2, "usage: redisson_client.py [--kind " + "|".join(KINDS) + "] [options] "
            "(hold|acquire_wait|loop) URL NAME  (other commands for the other kinds)")
    mode, url, name = args
    if fair_wait_ms is None:
        fair_wait_ms = FAIR_LOCK_WAIT_TIMEOUT_MS
    if lease_ms is None:
        lease_ms = LOCK_WATCHDOG_TIMEOUT_MS
    cluster = cluster or url.startswith(CLUSTER_SCHEME)
    lock = make_lock(kind, connect(url, cluster), name, lease_ms, cluster, fair_wait_ms)

    if mode == "loop":
        return loop(lock, hold_ms, pause_ms, duration_s, log_path, asks_path)

    if mode == "hold":
        if not lock.lock(timeout_s):
            die(3, "timed out waiting for " + name)
        say("acquired " + lock.owner)
        sys.stdin.readline()  # a line, or EOF when the test closes its end (or dies)
        say("released " + str(unlock(lock)))
        return 0

    started = time.monotonic()
    if not lock.lock(timeout_s, on_waiting=lambda ttl: say("waiting " + str(ttl))):
        die(3, "timed out waiting for " + name)
    acquired_ns = time.monotonic_ns()
    waited_ms = int((time.monotonic() - started) * 1000)
    say("acquired " + str(waited_ms) + " " + lock.owner +
        (" " + str(acquired_ns) if stamp else ""))
    say("released " + str(unlock(lock)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except redis.RedisError as e:
        die(3, "redis error: " + str(e))
    except OSError as e:  # the sharded subscription's own socket
        die(3, "connection error: " + str(e))
