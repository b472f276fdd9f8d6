#!/usr/bin/env python3
"""Self-check of redisson_family.py: redisson_client.py --kind fair|read|write against a real
redis-server, with no dlock code, showing that it behaves as Redisson's RFairLock and
RReadWriteLock do.

  layouts  the keys, fields, deadlines, channels and messages of each kind, step by step: a fair
           queue of two (deadlines a fairLockWaitTimeout apart, one channel per waiter), the
           first giving up (it leaves the queue, the second's deadline moves back by its wait),
           the unlock telling only the head ("0" on its own channel); a read hold's own lease
           key, the read unlock that frees the lock sending "0", the write unlock sending "1"
           and waking both waiting readers at once; and the default kind (RLock) unchanged.
  fair     4 `loop --kind fair` processes: holds never overlap, and no process acquires
           before one that had joined the queue before its own first attempt (`--log-asks`
           gives the time of each lock()'s first attempt); the same measure finds RLock (not
           fair) overtaking, so it can see an overtake.
  rw       3 `loop --kind read` and 1 `loop --kind write`: readers overlap each other, the
           writer overlaps nobody, and it gets the lock too.
Every run leaves no key behind. About 20 s in all; each child is bounded.

Usage: redisson_family_check.py [-v]  (Debian's python3-redis; redis-server from PATH, or
$DLOCK_REDIS_SERVER). Exit 0 all passed, 1 a check failed, 77 redis-server or the redis module
is missing (ctest's SKIP_RETURN_CODE).
"""

import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
try:
    import redis
except ImportError:
    print("redisson_family_check.py: skipped: the 'redis' module is missing")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "redisson_client.py")
FAIR_WAIT_MS = 300000  # Redisson's fairLockWaitTimeout, the client's default
VERBOSE = "-v" in sys.argv[1:]


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def note(line):
    if VERBOSE:
        print("  " + line, flush=True)


class Server:
    """A redis-server of its own: a free port, a temp dir, no persistence; killed by its pid."""

    def __init__(self, tmp):
        exe = os.environ.get("DLOCK_REDIS_SERVER") or "redis-server"
        for _ in range(8):  # the free port may be taken before the server binds it
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            log = open(os.path.join(tmp, "redis.log"), "w")
            self.proc = subprocess.Popen(
                [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--daemonize", "no", "--dir", tmp],
                stdout=log, stderr=subprocess.STDOUT)
            log.close()
            self.conn = redis.Redis(port=self.port, decode_responses=True, socket_timeout=5)
            end = time.monotonic() + 10
            while time.monotonic() < end and self.proc.poll() is None:
                try:
                    self.conn.ping()
                    self.url = "redis://127.0.0.1:%d" % self.port
                    return
                except redis.ConnectionError:
                    time.sleep(0.02)
            self.stop()
        raise Failure("redis-server did not start: " + open(os.path.join(tmp, "redis.log")).read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Client:
    """One redisson_client.py process; its stdout lines come through a queue."""

    def __init__(self, *args):
        self.args = args
        self.proc = subprocess.Popen([sys.executable, "-u", CLIENT] + [str(a) for a in args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout=15):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        check(line is not None, "%s: no line within %ss (exit %s, stderr %r)" % (
            " ".join(map(str, self.args)), timeout, self.proc.poll(), self.stderr()))
        return line

    def expect(self, first_word, timeout=15):
        """The next line, split, which must start with first_word."""
        words = self.line(timeout).split()
        check(words and words[0] == first_word, "%s: expected %r, got %r" % (
            " ".join(map(str, self.args)), first_word, words))
        return words

    def send(self, text):
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def close_stdin(self):
        self.proc.stdin.close()

    def wait(self, timeout=15):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failure(" ".join(map(str, self.args)) + ": still running")

    def stderr(self):
        if self.proc.poll() is None:
            return ""
        return self.proc.stderr.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Messages:
    """Every message published on channels matching `pattern`, in order."""

    def __init__(self, conn, pattern):
        self.pubsub = conn.pubsub()
        self.pubsub.psubscribe(pattern)
        check(self.pubsub.get_message(timeout=5) is not None, "PSUBSCRIBE unconfirmed")

    def take(self, n, timeout=5):
        out, end = [], time.monotonic() + timeout
        while len(out) < n and time.monotonic() < end:
            m = self.pubsub.get_message(timeout=end - time.monotonic())
            if m is not None and m["type"] == "pmessage":
                out.append((m["channel"], m["data"]))
        return out

    def rest(self):
        return self.take(1 << 30, timeout=0.3)


def fair_layout(srv, clients):
    name, r = "fair-layout", srv.conn
    queue_key, timeouts = "redisson_lock_queue:{%s}" % name, "redisson_lock_timeout:{%s}" % name
    channel = "redisson_lock__channel:{%s}" % name
    msgs = Messages(r, channel + ":*")
    holder = clients.add("--kind", "fair", "hold", srv.url, name)
    holder.expect("acquired")
    gives_up = clients.add("--kind", "fair", "--timeout-s", "2", "acquire_wait", srv.url, name)
    gives_up.expect("waiting")
    stays = clients.add("--kind", "fair", "acquire_wait", srv.url, name)
    stays.expect("waiting")
    queued = r.lrange(queue_key, 0, -1)
    check(len(queued) == 2, "two waiters queued: %r" % queued)
    first, second = queued
    due = dict(r.zrange(timeouts, 0, -1, withscores=True))
    now_ms = time.time() * 1000
    check(abs(due[first] - (now_ms + r.pttl(name) + FAIR_WAIT_MS)) < 2000,
          "first deadline = now + lock PTTL + wait: %r" % due)
    check(due[second] - due[first] == FAIR_WAIT_MS, "deadlines one wait apart: %r" % due)
    subscribed = set(r.pubsub_channels(channel + ":*"))
    check(subscribed == {channel + ":" + first, channel + ":" + second},
          "each waiter on its own channel: %r" % subscribed)
    check(gives_up.wait() == 3 and "timed out" in gives_up.stderr(), "the first gave up")
    check(r.lrange(queue_key, 0, -1) == [second], "the one that gave up left the queue")
    check(r.zscore(timeouts, second) == due[second] - FAIR_WAIT_MS,
          "its wait given back to the one behind it")
    holder.send("\n")
    check(holder.expect("released") == ["released", "1"], "holder released")
    check(stays.expect("acquired")[2] == second, "the head took the lock")
    stays.expect("released")
    check(msgs.take(1) == [(channel + ":" + second, "0")], "0 on the head's channel only")
    check(msgs.rest() == [], "nothing else published (the last unlock had no queue)")
    note("fair: queue, deadlines, give-up and head wake-up as RFairLock")


def rw_layout(srv, clients):
    name, r = "rw-layout", srv.conn
    channel = "redisson_rwlock:{%s}" % name
    msgs = Messages(r, channel)
    reader = clients.add("--kind", "read", "hold", srv.url, name)
    owner = reader.expect("acquired")[1]
    check(r.hgetall(name) == {"mode": "read", owner: "1"}, "read hash: %r" % r.hgetall(name))
    hold_key = "{%s}:%s:rwlock_timeout:1" % (name, owner)
    check(0 < r.pttl(hold_key) <= 30000 and 0 < r.pttl(name) <= 30000, "hold key with lease")
    writer = clients.add("--kind", "write", "acquire_wait", srv.url, name)
    writer.expect("waiting")
    reader.send("\n")
    check(reader.expect("released") == ["released", "1"], "reader released")
    check(r.exists(hold_key) == 0, "the read unlock deleted its hold key")
    words = writer.expect("acquired")
    check(words[2].endswith(":write") and int(words[1]) < 5000, "writer woken: %r" % words)
    writer.expect("released")
    check(msgs.take(2) == [(channel, "0"), (channel, "1")], "read unlock 0, write unlock 1")

    writer = clients.add("--kind", "write", "hold", srv.url, name)
    owner = writer.expect("acquired")[1]
    check(r.hgetall(name) == {"mode": "write", owner: "1"}, "write hash: %r" % r.hgetall(name))
    readers = [clients.add("--kind", "read", "acquire_wait", srv.url, name) for _ in range(2)]
    for c in readers:
        c.expect("waiting")
    writer.send("\n")
    writer.expect("released")
    for c in readers:
        check(int(c.expect("acquired")[1]) < 5000, "both readers woken by the one 1")
        c.expect("released")
    got = [m for _, m in msgs.take(2)] + [m for _, m in msgs.rest()]
    check(got[0] == "1" and set(got[1:]) <= {"0"} and 1 <= len(got[1:]) <= 2,
          "write unlock 1, then 0 from the read unlock(s) that freed it: %r" % got)
    note("rw: hash, hold keys, 0 on the freeing read unlock, 1 on the write unlock")

    holder = clients.add("hold", srv.url, "mutex-layout")
    holder.expect("acquired")
    waiter = clients.add("acquire_wait", srv.url, "mutex-layout")
    waiter.expect("waiting")
    holder.send("\n")
    holder.expect("released")
    check(int(waiter.expect("acquired")[1]) < 5000, "the default kind (RLock) still works")
    waiter.expect("released")


def run_fleet(srv, clients, tmp, name, members, duration_s):
    """Starts `members` ([kind, extra args...]) on `name` together; checks that only read holds
    overlapped and no key is left. Returns the holds sorted by start as (start ns, end ns,
    member), each member's stats, and how many pairs of holds overlapped."""
    procs = []
    for i, (kind, *extra) in enumerate(members):
        log = os.path.join(tmp, "%s-%d.log" % (name, i))
        procs.append((clients.add("--kind", kind, "loop", srv.url, name, "--duration-s",
                                  duration_s, "--log", log, *extra), log))
    for p, _ in procs:
        check(p.line(30) == "ready", "loop ready")
    for p, _ in procs:
        p.close_stdin()
    holds, stats = [], []
    for who, (p, log) in enumerate(procs):
        check(p.wait(duration_s + 30) == 0, "loop exit: " + p.stderr())
        s = {}
        while True:
            line = p.lines.get(timeout=5)
            if line is None:
                break
            key, value = line.split()
            s[key] = int(value)
        stats.append(s)
        with open(log) as f:
            holds.extend((int(a), int(b), who) for a, b in (line.split() for line in f))
    holds.sort()
    shared = 0  # pairs of overlapping holds (only read holds may overlap)
    active = []
    for start, end, who in holds:
        active = [h for h in active if h[1] > start]
        for h in active:
            check(members[h[2]][0] == members[who][0] == "read",
                  "overlap: member %d %r and member %d %r" % (h[2], h[:2], who, (start, end)))
            shared += 1
        active.append((start, end, who))
    for s in stats:
        check(s["count"] > 0 and s["bad_messages"] == 0, "every member acquired: %r" % stats)
    check(srv.conn.keys("*") == [], "keys left: %r" % srv.conn.keys("*"))
    return holds, stats, shared


def fifo_violations(asks):
    """The acquisitions (sent, answered, queued, start, who) that overtook an earlier queued
    one: b started holding before a although a's first attempt had joined the queue (queued,
    answered) before b's first attempt was sent."""
    out = []
    earliest_later = None  # the least `answered` of the queued asks that start later
    for ask in sorted(asks, key=lambda a: a[3], reverse=True):
        sent, answered, queued, _, _ = ask
        if earliest_later is not None and earliest_later[1] < sent:
            out.append((ask, earliest_later))
        if queued and (earliest_later is None or answered < earliest_later[1]):
            earliest_later = ask
    return out


def order_fleet(srv, clients, tmp, kind):
    """Four processes of `kind` on one lock, each asking again at once after its unlock; their
    acquisitions that overtook an earlier queued one (fifo_violations), and their stats."""
    members = [[kind, "--hold-ms", "2", "--log-asks", os.path.join(tmp, "asks-%d" % i)]
               for i in range(4)]
    _, stats, _ = run_fleet(srv, clients, tmp, kind + "-fleet", members, 4)
    asks = []
    for i in range(4):
        with open(os.path.join(tmp, "asks-%d" % i)) as f:  # appended to: read, then drop
            asks.extend(tuple(map(int, line.split())) + (i,) for line in f)
        os.remove(os.path.join(tmp, "asks-%d" % i))
    queued = sum(a[2] for a in asks)
    bad = fifo_violations(asks)
    note("%s: %d acquisitions, %d after queueing, %d out of queue order; %r" % (
        kind, len(asks), queued, len(bad), [s["count"] for s in stats]))
    return bad, queued, stats


def fair_order(srv, clients, tmp):
    bad, queued, stats = order_fleet(srv, clients, tmp, "fair")
    check(queued >= 100, "too few waits to judge the order: %d" % queued)
    check(not bad, "acquired out of queue order: %r" % bad[:3])
    check(sum(s["ttl_expiries"] for s in stats) == 0, "every wait ended by its message: %r" % stats)


def rlock_order(srv, clients, tmp):
    """The same measure on RLock, which is not fair (an unlocking process asks again before
    the woken waiter does, and wins): it must find overtakes, or it could not see any."""
    bad, _, _ = order_fleet(srv, clients, tmp, "mutex")
    check(len(bad) >= 10, "RLock overtook only %d times: the measure is blind" % len(bad))


def rw_fleet(srv, clients, tmp):
    # Readers out of step, so that they overlap but also leave the lock free now and then; a
    # writer holding longer than their pauses, so that they wait for it too.
    members = [["read", "--hold-ms", str(h), "--pause-ms", str(p)]
               for h, p in ((8, 20), (10, 23), (12, 17))]
    members.append(["write", "--hold-ms", "25", "--pause-ms", "10"])
    _, stats, reader_overlaps = run_fleet(srv, clients, tmp, "rw-fleet", members, 4)
    check(reader_overlaps >= 10, "readers shared the lock only %d times" % reader_overlaps)
    check(stats[3]["count"] >= 3, "the writer got the lock: %r" % stats[3])
    check(sum(s["wake_wins"] for s in stats[:3]) >= 3,
          "readers woken by the write unlock's 1: %r" % stats)
    note("rw: %d reader overlaps, writer %d holds, stats %r" % (
        reader_overlaps, stats[3]["count"], stats))


class Clients:
    """Every client started, so that all are killed at the end whatever happened."""

    def __init__(self):
        self.all = []

    def add(self, *args):
        c = Client(*args)
        self.all.append(c)
        return c

    def kill_all(self):
        for c in self.all:
            c.kill()


def main():
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="redisson_family_check.") as tmp:
        try:
            srv = Server(tmp)
        except FileNotFoundError:
            print("redisson_family_check.py: skipped: no redis-server")
            return 77
        clients = Clients()
        try:
            for check_fn in (fair_layout, rw_layout):
                check_fn(srv, clients)
                print("ok " + check_fn.__name__, flush=True)
            for check_fn in (fair_order, rlock_order, rw_fleet):
                check_fn(srv, clients, tmp)
                print("ok " + check_fn.__name__, flush=True)
        except Failure as e:
            print("FAIL: " + str(e), flush=True)
            return 1
        finally:
            clients.kill_all()
            srv.stop()
    print("redisson_family_check.py: all passed in %.1f s" % (time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
