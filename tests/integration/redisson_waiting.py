"""What every lock of Redisson's family shares, for redisson_client.py and redisson_family.py:
the names Redisson derives from a lock's name, its owner ids, the LockPubSub messages, and
RedissonLock.lock()'s waiting (PubSubLock), which RLock, RFairLock and both sides of
RReadWriteLock inherit (each with its own channel).
"""

import threading
import time
import uuid

from redisson_cluster import ShardedPubSub

UNLOCK_MESSAGE = "0"  # LockPubSub.UNLOCK_MESSAGE: wakes one waiter of the process
READ_UNLOCK_MESSAGE = "1"  # LockPubSub.READ_UNLOCK_MESSAGE: wakes every waiter of the process
LOCK_WATCHDOG_TIMEOUT_MS = 30000  # Config.lockWatchdogTimeout: the lease when none is given
FAIR_LOCK_WAIT_TIMEOUT_MS = 300000  # Config.fairLockWaitTimeout (5 min): a fair waiter's slack


def prefix_name(prefix, name):
    """RedissonObject.prefixName: `prefix:{name}`, or `prefix:name` if it has a hash tag."""
    if "{" in name:
        return prefix + ":" + name
    return prefix + ":{" + name + "}"


def suffix_name(name, suffix):
    """RedissonObject.suffixName: `{name}:suffix`, or `name:suffix` if it has a hash tag."""
    if "{" in name:
        return name + ":" + suffix
    return "{" + name + "}:" + suffix


def new_owner():
    """RedissonBaseLock.getLockName(threadId): <connection manager uuid>:<thread id>."""
    return str(uuid.uuid4()) + ":" + str(threading.get_ident())


def client_time_ms():
    """System.currentTimeMillis(): the fair lock's deadlines are on the client's wall clock."""
    return int(time.time() * 1000)


class PubSubLock:
    """What the family shares: an owner, a lease, the unlock channel, and RedissonLock.lock().

    A subclass sets `owner` (the hash field it holds) and `channel`, and defines try_acquire()
    (None when acquired, else a TTL in ms), unlock() (the script's reply; None: not the
    owner) and, when a wait that gives up must undo something, acquire_failed().

    After each lock(), `ask` is (CLOCK_MONOTONIC ns before its first attempt, ns after it,
    whether that attempt failed): a fair lock's failed first attempt is the one that joined
    the queue, in between.
    """

    def __init__(self, conn, name, lease_ms, cluster=False):
        self.conn = conn
        self.name = name
        self.lease_ms = lease_ms
        self.cluster = cluster
        # Redisson's publish command (PublishSubscribeService.getPublishCommand): SPUBLISH on a
        # Redis >= 7 cluster, where the waiters SSUBSCRIBE.
        self.publish = "spublish" if cluster else "publish"
        self.ask = None

    def acquire_failed(self):
        """RedissonBaseLock.acquireFailedAsync: nothing to undo, except for a fair lock."""

    def new_pubsub(self):
        """A pub/sub connection for waits: redis-py's, or sharded on a cluster."""
        if self.cluster:
            return ShardedPubSub(self.conn)
        return self.conn.pubsub(ignore_subscribe_messages=False)

    def lock(self, timeout_s, on_waiting=None, pubsub=None, stats=None):
        """RedissonLock.lock(): try; if held, subscribe and wait up to the TTL per attempt.

        True once acquired; False when timeout_s passed first, after acquire_failed() (what
        tryLock does when its wait ends). With `pubsub` (kept by the caller, as Redisson keeps
        its pub/sub connections) the channel is unsubscribed when the wait ends, without
        waiting for the confirmation (Redisson's unsubscribe is asynchronous); else the
        connection is closed. `stats` (a dict) counts the wake-ups (see redisson_client.loop).
        """
        if self._lock(timeout_s, on_waiting, pubsub, stats):
            return True
        self.acquire_failed()
        return False

    def _lock(self, timeout_s, on_waiting, pubsub, stats):
        deadline = time.monotonic() + timeout_s
        sent = time.monotonic_ns()
        ttl = self.try_acquire()
        self.ask = (sent, time.monotonic_ns(), ttl is not None)
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
                woken_at = self._wait(pubsub, ttl, left, stats)
        finally:
            if own:
                pubsub.close()
            else:
                pubsub.unsubscribe(self.channel)

    def _wait(self, pubsub, ttl, left, stats):
        """getLatch().tryAcquire(ttl): released by an unlock message, or the TTL passes (no
        bound when the TTL is negative). The monotonic time of the waking message, or None.

        A TTL of 0 (a fair waiter not at the head while the lock is free): tryAcquire(0) takes
        a message already delivered, if any (the latch is a semaphore: a message's permit
        outlives the wait it was meant for), and returns at once; so Redisson's waiter retries
        in a busy loop until the head has taken the lock.
        """
        if ttl == 0:
            if stats is not None:
                stats["zero_ttl_retries"] = stats.get("zero_ttl_retries", 0) + 1
            m = pubsub.get_message(timeout=0)
            return self._wake(m, stats)
        wait_s = min(left, ttl / 1000.0) if ttl >= 0 else left
        end = time.monotonic() + wait_s
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                if stats is not None and wait_s < left:
                    stats["ttl_expiries"] += 1
                return None
            woken_at = self._wake(pubsub.get_message(timeout=remaining), stats)
            if woken_at is not None:
                return woken_at

    @staticmethod
    def _wake(m, stats):
        """LockPubSub.onMessage: `0` and `1` release the waiter (this process has one); any
        other message is counted and ignored."""
        if m is None or m["type"] != "message":
            return None
        if m["data"] not in (UNLOCK_MESSAGE, READ_UNLOCK_MESSAGE):
            if stats is not None:
                stats["bad_messages"] += 1
            return None
        if stats is not None:
            stats["wakes"] += 1
        return time.monotonic()
