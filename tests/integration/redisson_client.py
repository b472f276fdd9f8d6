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
Options (before the mode): --lease-ms N (default 30000, Redisson's lockWatchdogTimeout; no
renewal is done, so a hold must end before it), --timeout-s N (give up waiting: exit 3).
Every line is flushed; errors go to stderr with a non-zero exit.
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

UNLOCK_MESSAGE = "0"  # LockPubSub.UNLOCK_MESSAGE


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
    def __init__(self, conn, name, lease_ms):
        self.conn = conn
        self.name = name
        self.channel = prefix_name("redisson_lock__channel", name)
        self.lease_ms = lease_ms
        # RedissonBaseLock.getLockName(threadId): <connection manager uuid>:<thread id>
        self.owner = str(uuid.uuid4()) + ":" + str(threading.get_ident())

    def try_acquire(self):
        """None when acquired, else the lock's PTTL in ms."""
        return self.conn.eval(TRY_LOCK, 1, self.name, self.lease_ms, self.owner)

    def unlock(self):
        result = self.conn.eval(UNLOCK, 2, self.name, self.channel, UNLOCK_MESSAGE,
                                self.lease_ms, self.owner)
        if result is None:
            die(3, "unlock: not locked by this owner (" + self.owner + ")")
        return result

    def lock(self, timeout_s, on_waiting=None):
        """RedissonLock.lock(): try; if held, subscribe and wait up to the TTL per attempt."""
        deadline = time.monotonic() + timeout_s
        ttl = self.try_acquire()
        if ttl is None:
            return
        pubsub = self.conn.pubsub(ignore_subscribe_messages=False)
        try:
            pubsub.subscribe(self.channel)
            # syncSubscription: wait for the server's confirmation.
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    die(3, "timed out subscribing to " + self.channel)
                m = pubsub.get_message(timeout=left)
                if m is not None and m["type"] == "subscribe":
                    break
            first = True
            while True:
                ttl = self.try_acquire()
                if ttl is None:
                    return
                if first and on_waiting is not None:
                    on_waiting(ttl)
                first = False
                left = deadline - time.monotonic()
                if left <= 0:
                    die(3, "timed out waiting for " + self.name)
                # getLatch().tryAcquire(ttl): released by an unlock message, or the TTL passes.
                wait_s = min(left, ttl / 1000.0) if ttl >= 0 else left
                end = time.monotonic() + wait_s
                while True:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        break
                    m = pubsub.get_message(timeout=remaining)
                    if m is not None and m["type"] == "message" and m["data"] == UNLOCK_MESSAGE:
                        break
        finally:
            pubsub.close()


def main(argv):
    lease_ms = 30000
    timeout_s = 60.0
    args = list(argv[1:])
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if not args:
            die(2, "missing value for " + opt)
        if opt == "--lease-ms":
            lease_ms = int(args.pop(0))
        elif opt == "--timeout-s":
            timeout_s = float(args.pop(0))
        else:
            die(2, "unknown option " + opt)
    if len(args) != 3 or args[0] not in ("hold", "acquire_wait"):
        die(2, "usage: redisson_client.py [--lease-ms N] [--timeout-s N] "
               "(hold|acquire_wait) URL NAME")
    mode, url, name = args
    conn = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
    lock = RLock(conn, name, lease_ms)

    if mode == "hold":
        lock.lock(timeout_s)
        say("acquired " + lock.owner)
        sys.stdin.readline()  # a line, or EOF when the test closes its end (or dies)
        say("released " + str(lock.unlock()))
        return 0

    started = time.monotonic()
    lock.lock(timeout_s, on_waiting=lambda ttl: say("waiting " + str(ttl)))
    waited_ms = int((time.monotonic() - started) * 1000)
    say("acquired " + str(waited_ms) + " " + lock.owner)
    say("released " + str(lock.unlock()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except redis.RedisError as e:
        die(3, "redis error: " + str(e))
