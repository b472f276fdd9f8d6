#!/usr/bin/env python3
"""An independent client of Redisson's RLock protocol, for dlock's interoperability tests.

It speaks the wire protocol exactly as Redisson's RedissonLock does (tryLockInnerAsync,
unlockInnerAsync and the LockPubSub wait), written from the Lua scripts Redisson sends, with
none of dlock's code: the lock is a hash at the lock's name whose field `<uuid>:<threadId>`
counts the holds, with a PEXPIRE lease; an unlock at zero deletes it and publishes "0" on
`redisson_lock__channel:{name}`; a waiter subscribes to that channel first, then tries, and
waits for a message for at most the remaining TTL before trying again.

Usage (Debian's python3-redis):
  redisson_client.py hold URL NAME
      acquire (blocking), print "acquired <owner>"; hold until a line or EOF on stdin; unlock,
      print "released <unlock script result>".
  redisson_client.py acquire_wait URL NAME
      try once; if held, print "waiting <pttl>" (subscribed by then) and wait through pub/sub;
      once acquired print "acquired <ms waited> <owner>", unlock, print "released <result>".
  redisson_client.py loop URL NAME [--hold-ms N] [--pause-ms N] [--duration-s N] [--log FILE]
      prints "ready" once connected and waits for EOF on stdin (so that several processes start
      together); then for N seconds (default 6): lock() as above (the wait's subscription ends
      with it, as Redisson unsubscribes once its waiter stops waiting; a wait still on at the
      end gives up), hold N ms (default 1), unlock, pause N ms (default 0: the next lock()
      follows the unlock at once). With --log, appends "<start ns> <end ns>" (CLOCK_MONOTONIC,
      inside the hold) per acquisition to FILE. Prints "count <acquisitions>", "max_lock_ms
      <longest lock()>", "wakes <unlock messages that woke a wait>", "wake_wins <of them, the
      next attempt acquired>", "ttl_expiries <waits that ended by the TTL, no message>",
      "bad_messages <messages other than 0/1 on the channel>", "max_wake_to_attempt_us
      <longest delay from such a message to the next attempt>".
Options (anywhere): --lease-ms N (default 30000, Redisson's lockWatchdogTimeout; no renewal is
done, so a hold must end before it), --timeout-s N (give up waiting: exit 3), --stamp
(acquire_wait: the acquired line ends with the CLOCK_MONOTONIC ns at which lock() returned),
--cluster (URL is one node of a Redis Cluster).
Every line is flushed; errors go to stderr with a non-zero exit.

Cluster mode (a `redis+cluster://host:port,host:port...` URL, or --cluster with a redis:// URL of
one node), as Redisson runs on a Redis >= 7 cluster: the scripts go to the master of the lock
name's slot (following MOVED and ASK, retrying through a failover), the unlock script
sends its message with SPUBLISH instead of PUBLISH, and a waiter SSUBSCRIBEs to the channel on
that master (sharded pub/sub, spoken over a socket of its own: python3-redis 4.3 has none). The
waiting is the same: wake on `0`/`1` only, else after the lock's TTL. A subscription that the
server ends (the slot moved) or whose connection drops is made again on the slot's master.
That part lives in redisson_cluster.py, next to this file.
"""

import sys
import threading
import time
import uuid

try:
    import redis
except ImportError:  # pragma: no cover - reported to the test as a clear failure
    sys.stderr.write("redisson_client.py: the 'redis' module is missing "
                     "(apt-get install python3-redis)\n")
    sys.exit(4)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree for the module below
from redisson_cluster import CLUSTER_SCHEME, ShardedPubSub, connect_cluster  # noqa: E402

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

UNLOCK_MESSAGE = "0"  # LockPubSub.UNLOCK_MESSAGE
READ_UNLOCK_MESSAGE = "1"  # LockPubSub.READ_UNLOCK_MESSAGE: releases every waiter


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def die(code, message):
    sys.stderr.write("redisson_client.py: " + message + "\n")
    sys.stderr.flush()
    sys.exit(code)


def prefix_name(prefix, name):
    """RedissonObject.prefixName: `prefix:{name}`, or `prefix:name` if it has a hash tag."""
    if "{" in name:
        return prefix + ":" + name
    return prefix + ":{" + name + "}"


class RLock:
    def __init__(self, conn, name, lease_ms, cluster=False):
        self.conn = conn
        self.name = name
        self.channel = prefix_name("redisson_lock__channel", name)
        self.lease_ms = lease_ms
        self.cluster = cluster
        # RedissonBaseLock.getLockName(threadId): <connection manager uuid>:<thread id>
        self.owner = str(uuid.uuid4()) + ":" + str(threading.get_ident())

    def try_acquire(self):
        """None when acquired, else the lock's PTTL in ms."""
        return self.conn.eval(TRY_LOCK, 1, self.name, self.lease_ms, self.owner)

    def new_pubsub(self):
        """A pub/sub connection for waits: redis-py's, or sharded on a cluster."""
        if self.cluster:
            return ShardedPubSub(self.conn)
        return self.conn.pubsub(ignore_subscribe_messages=False)

    def unlock(self):
        script = UNLOCK_SHARDED if self.cluster else UNLOCK
        result = self.conn.eval(script, 2, self.name, self.channel, UNLOCK_MESSAGE,
                                self.lease_ms, self.owner)
        if result is None:
            die(3, "unlock: not locked by this owner (" + self.owner + ")")
        return result

    def lock(self, timeout_s, on_waiting=None, pubsub=None, stats=None):
        """RedissonLock.lock(): try; if held, subscribe and wait up to the TTL per attempt.

        True once acquired; False when timeout_s passed first. With `pubsub` (kept by the
        caller, as Redisson keeps its pub/sub connections) the channel is unsubscribed when the
        wait ends, without waiting for the confirmation (Redisson's unsubscribe is asynchronous);
        else the connection is closed. `stats` (a dict) counts the wake-ups (see loop()).
        """
        deadline = time.monotonic() + timeout_s
        ttl = self.try_acquire()
        if ttl is None:
            return True
        own = pubsub is None
        if own:
            pubsub = self.new_pubsub()
        try:
            pubsub.subscribe(self.channel)
            # syncSubscription: wait for the server's confirmation. Anything before it (the
            # confirmation of an earlier unsubscribe, messages of an earlier subscription) is
            # not for this wait.
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                m = pubsub.get_message(timeout=left)
                if m is not None and m["type"] == "subscribe" and m["channel"] == self.channel:
                    break
            first = True
            woken_at = None
            while True:
                if woken_at is not None and stats is not None:
                    lag_us = int((time.monotonic() - woken_at) * 1e6)
                    stats["max_wake_to_attempt_us"] = max(stats["max_wake_to_attempt_us"], lag_us)
                ttl = self.try_acquire()
                if ttl is None:
                    if woken_at is not None and stats is not None:
                        stats["wake_wins"] += 1
                    return True
                if first and on_waiting is not None:
                    on_waiting(ttl)
                first = False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                # getLatch().tryAcquire(ttl): released by an unlock message, or the TTL passes.
                wait_s = min(left, ttl / 1000.0) if ttl >= 0 else left
                end = time.monotonic() + wait_s
                woken_at = None
                while True:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        if stats is not None and wait_s < left:
                            stats["ttl_expiries"] += 1
                        break
                    m = pubsub.get_message(timeout=remaining)
                    if m is None or m["type"] != "message":
                        continue
                    if stats is not None and m["data"] not in ("0", "1"):
                        stats["bad_messages"] += 1
                    if m["data"] in (UNLOCK_MESSAGE, READ_UNLOCK_MESSAGE):
                        woken_at = time.monotonic()
                        if stats is not None:
                            stats["wakes"] += 1
                        break
        finally:
            if own:
                pubsub.close()
            else:
                pubsub.unsubscribe(self.channel)


def loop(lock, hold_ms, pause_ms, duration_s, log_path):
    """lock(), hold, unlock() until duration_s passed; prints the counts (see the usage)."""
    # Redisson keeps its pub/sub connections; one for this process's waits.
    pubsub = lock.new_pubsub()
    stats = {"wakes": 0, "wake_wins": 0, "ttl_expiries": 0, "bad_messages": 0,
             "max_wake_to_attempt_us": 0}
    holds = []
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
        lock.unlock()
        if pause_ms > 0:
            time.sleep(pause_ms / 1000.0)
    pubsub.close()
    if log_path:
        with open(log_path, "a") as f:
            f.write("".join("%d %d\n" % h for h in holds))
    say("count " + str(len(holds)))
    say("max_lock_ms " + str(int(longest * 1000)))
    for key in ("wakes", "wake_wins", "ttl_expiries", "bad_messages", "max_wake_to_attempt_us"):
        say(key + " " + str(stats[key]))
    return 0


def main(argv):
    lease_ms = 30000
    timeout_s = 60.0
    stamp = False
    hold_ms = 1.0
    pause_ms = 0.0
    duration_s = 6.0
    log_path = None
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
        else:
            die(2, "unknown option " + opt)
    if len(args) != 3 or args[0] not in ("hold", "acquire_wait", "loop"):
        die(2, "usage: redisson_client.py [options] (hold|acquire_wait|loop) URL NAME")
    mode, url, name = args
    if url.startswith(CLUSTER_SCHEME) or cluster:
        lock = RLock(connect_cluster(url), name, lease_ms, cluster=True)
    else:
        conn = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
        lock = RLock(conn, name, lease_ms)

    if mode == "loop":
        return loop(lock, hold_ms, pause_ms, duration_s, log_path)

    if mode == "hold":
        if not lock.lock(timeout_s):
            die(3, "timed out waiting for " + name)
        say("acquired " + lock.owner)
        sys.stdin.readline()  # a line, or EOF when the test closes its end (or dies)
        say("released " + str(lock.unlock()))
        return 0

    started = time.monotonic()
    if not lock.lock(timeout_s, on_waiting=lambda ttl: say("waiting " + str(ttl))):
        die(3, "timed out waiting for " + name)
    acquired_ns = time.monotonic_ns()
    waited_ms = int((time.monotonic() - started) * 1000)
    say("acquired " + str(waited_ms) + " " + lock.owner +
        (" " + str(acquired_ns) if stamp else ""))
    say("released " + str(lock.unlock()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except redis.RedisError as e:
        die(3, "redis error: " + str(e))
    except OSError as e:  # the sharded subscription's own socket
        die(3, "connection error: " + str(e))
