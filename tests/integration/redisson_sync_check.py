#!/usr/bin/env python3
"""Self-check of redisson_sync.py: redisson_client.py --kind semaphore|permits|latch against a
real redis-server, with no dlock code, showing that it speaks Redisson's RSemaphore,
RPermitExpirableSemaphore and RCountDownLatch on the wire.

  semaphore  trySetPermits publishes the permits once; holds take the counter down; a waiter
             subscribes to `redisson_sc:{name}` and is not woken by a `0` (nor `-1`) even with a
             permit free, only by a positive message: a holder's release, which publishes the
             new count; release(N) by anyone, addPermits publishing the new count (`0` too);
             a hash-tagged name's channel.
  permits    ids 32 hex digits, stored raw (16 bytes) in `{name}:timeout`, "never" scored
             922337203685477; a waiter behind a never-expiring permit is woken by its release;
             a lapsed permit is reclaimed by the next acquire (whose waiter wakes by its
             deadline, no message needed, publishing the count) and by availablePermits; a
             release of a lapsed permit answers 0 and adds it back once at most; addPermits
             publishes the number added, only if positive; a hash-tagged name's keys.
  latch      trySetCount publishes `1` once; await() on no count opens at once; a waiter
             subscribed while the count is above 0 ignores `1` and `2` (it does not even read
             the count again), and opens on the `0` of
             the count down that reaches 0 (the key goes); a count down past 0 is silent;
             --timeout-s ends a wait with exit 3; a hash-tagged name's channel keeps its braces.
  fleets     4 `loop --kind semaphore` and 4 `loop --kind permits --lease-ms 10000` processes on
             2 permits: never more than 2 holds at once, 2 at once seen, every process served,
             the counter back at 2 and nothing else left.
Every message published is checked, in order. About 20 s. Cluster mode is not checked here (no
cluster fixture in these checks; the C++ interop tests cover it).

Server, Client and Messages come from redisson_family_check.py. Usage: redisson_sync_check.py
[-v] (Debian's python3-redis; redis-server from PATH, or $DLOCK_REDIS_SERVER). Exit 0 all
passed, 1 a check failed, 77 redis-server or the redis module is missing (ctest's
SKIP_RETURN_CODE).
"""

import os
import queue
import re
import sys
import tempfile
import time

sys.dont_write_bytecode = True
try:
    import redis
except ImportError:
    print("redisson_sync_check.py: skipped: the 'redis' module is missing")
    sys.exit(77)
from redisson_family_check import (Clients, Failure, Messages, Server, check,  # noqa: E402
                                   note)

NEVER = 922337203685477.0  # RedissonPermitExpirableSemaphore.nonExpirableTimeout


def run(clients, *args, code=0):
    """A one-shot command's stdout lines, once it exited with `code`."""
    c = clients.add(*args)
    rc = c.wait()
    lines = []
    while True:
        line = c.lines.get(timeout=5)
        if line is None:
            break
        lines.append(line)
    check(rc == code, "%s: exit %s (wanted %d), stderr %r" % (" ".join(map(str, args)), rc,
                                                              code, c.stderr()))
    return lines


def silent(client, seconds):
    """No line from `client` for `seconds`."""
    try:
        line = client.lines.get(timeout=seconds)
    except queue.Empty:
        return
    raise Failure("%s: unexpected line %r" % (" ".join(map(str, client.args)), line))


def subscribed(r, channel):
    return channel in r.pubsub_channels()


def semaphore_layout(srv, clients):
    name, r, url = "sem-layout", srv.conn, srv.url
    ch = "redisson_sc:{%s}" % name
    msgs = Messages(r, ch)
    sem = ("--kind", "semaphore")
    check(run(clients, *sem, "set_permits", url, name, 2) == ["1"], "trySetPermits on none")
    check(run(clients, *sem, "set_permits", url, name, 5) == ["0"], "trySetPermits on some")
    check(r.get(name) == "2" and msgs.take(1) == [(ch, "2")] and msgs.rest() == [],
          "the permits published once")
    check(run(clients, *sem, "available", url, name) == ["2"], "availablePermits")
    holders = [clients.add(*sem, "hold", url, name) for _ in range(2)]
    for h in holders:
        check(h.expect("acquired") == ["acquired", "-"], "a holder")
    check(r.get(name) == "0", "both permits taken")
    waiter = clients.add(*sem, "acquire_wait", url, name)
    waiter.expect("waiting")
    check(subscribed(r, ch), "the waiter subscribed to " + ch)
    # A permit freed behind its back, and messages that carry no permit: it must not wake.
    r.set(name, 1)
    r.publish(ch, "0")
    r.publish(ch, "-1")
    silent(waiter, 0.7)
    check(r.get(name) == "1", "woken by 0 or -1")
    r.set(name, 0)
    holders[0].send("\n")
    check(holders[0].expect("released") == ["released", "1"], "holder released")
    words = waiter.expect("acquired")
    check(words[2] == "-" and 700 <= int(words[1]) < 5000, "woken by the release: %r" % words)
    check(waiter.expect("released") == ["released", "1"], "waiter released")
    check(run(clients, *sem, "release", url, name, 3) == ["ok"], "release(3) by anyone")
    check(run(clients, *sem, "release", url, name, 0) == ["ok"], "release(0)")
    check(run(clients, *sem, "add_permits", url, name, -4) == ["ok"], "addPermits(-4)")
    check(run(clients, *sem, "add_permits", url, name, 2) == ["ok"], "addPermits(2)")
    holders[1].send("\n")
    holders[1].expect("released")
    check(run(clients, *sem, "available", url, name) == ["3"], "3 left")
    got = [m for _, m in msgs.take(8)] + [m for _, m in msgs.rest()]
    check(got == ["0", "-1", "1", "1", "4", "0", "2", "3"],
          "each release and addPermits publishes the new count (release(0) nothing): %r" % got)
    tagged = "sem{tag}"
    tagged_msgs = Messages(r, "redisson_sc:" + tagged)
    check(run(clients, *sem, "set_permits", url, tagged, 1) == ["1"], "tagged trySetPermits")
    check(tagged_msgs.take(1) == [("redisson_sc:" + tagged, "1")], "tagged channel: no braces")
    r.delete(name, tagged)
    note("semaphore: counter, messages, wake on positive values only")


def zset(raw, key):
    return raw.zrange(key, 0, -1, withscores=True)


def permits_layout(srv, clients):
    name, r, url = "perm-layout", srv.conn, srv.url
    raw = redis.Redis(port=srv.port, socket_timeout=5)  # the ids are raw bytes
    ch, timeouts = "redisson_sc:{%s}" % name, "{%s}:timeout" % name
    msgs = Messages(r, ch)
    per = ("--kind", "permits")
    check(run(clients, *per, "set_permits", url, name, 1) == ["1"], "trySetPermits")
    check(msgs.take(1) == [(ch, "1")], "the permits published")

    holder = clients.add(*per, "hold", url, name)
    first = holder.expect("acquired")[1]
    check(re.fullmatch("[0-9a-f]{32}", first) is not None, "a 32-hex-digit id: " + first)
    check(zset(raw, timeouts) == [(bytes.fromhex(first), NEVER)],
          "the raw id, never expiring: %r" % zset(raw, timeouts))
    check(r.get(name) == "0", "the counter taken")
    waiter = clients.add(*per, "acquire_wait", url, name)
    waiter.expect("waiting")
    silent(waiter, 0.5)  # no deadline to wait for: only a message wakes it
    holder.send("\n")
    check(holder.expect("released") == ["released", "1"], "tryRelease of a live permit")
    words = waiter.expect("acquired")
    check(words[2] != first and int(words[1]) >= 500, "woken by the release: %r" % words)
    check(waiter.expect("released") == ["released", "1"], "the waiter released")
    check(msgs.take(2) == [(ch, "1"), (ch, "1")] and msgs.rest() == [],
          "each release published the count")

    # A lapsed permit, reclaimed by the next acquire: its waiter wakes by the deadline.
    holder = clients.add(*per, "--lease-ms", "1000", "hold", url, name)
    lapsing = holder.expect("acquired")[1]
    due = raw.zscore(timeouts, bytes.fromhex(lapsing))
    now_ms = time.time() * 1000
    check(due is not None and now_ms - 1000 < due <= now_ms + 1000,
          "deadline: client time + lease (%r, now %d)" % (due, now_ms))
    waiter = clients.add(*per, "acquire_wait", url, name)
    waiter.expect("waiting")
    words = waiter.expect("acquired")
    check(300 <= int(words[1]) < 3000 and words[2] != lapsing,
          "the waiter took the lapsed permit at its deadline: %r" % words)
    waiter.expect("released")
    check(msgs.take(2) == [(ch, "1"), (ch, "1")], "the reclaim and the release published")
    holder.send("\n")
    check(holder.expect("released") == ["released", "0"], "releasing a reclaimed permit: 0")
    check(r.get(name) == "1" and msgs.rest() == [], "nothing added back, nothing sent")

    # Lapsed and not reclaimed: the release answers 0 and puts it back once.
    holder = clients.add(*per, "--lease-ms", "200", "hold", url, name)
    holder.expect("acquired")
    time.sleep(0.4)
    holder.send("\n")
    check(holder.expect("released") == ["released", "0"], "releasing a lapsed permit: 0")
    check(r.get(name) == "1" and r.exists(timeouts) == 0, "it went back once")
    check(msgs.take(1) == [(ch, "1")], "and the count was published")

    # availablePermits reclaims too; the late release then changes nothing.
    holder = clients.add(*per, "--lease-ms", "200", "hold", url, name)
    holder.expect("acquired")
    time.sleep(0.4)
    check(run(clients, *per, "available", url, name) == ["1"], "availablePermits reclaimed")
    check(r.exists(timeouts) == 0 and msgs.take(1) == [(ch, "1")], "reclaimed and published")
    holder.send("\n")
    check(holder.expect("released") == ["released", "0"], "late release: 0")
    unknown = os.urandom(16).hex()
    check(run(clients, *per, "release_id", url, name, unknown) == ["0"], "unknown id: 0")
    check(r.get(name) == "1" and msgs.rest() == [], "no double add, nothing sent")

    check(run(clients, *per, "add_permits", url, name, 2) == ["ok"], "addPermits(2)")
    check(run(clients, *per, "add_permits", url, name, -1) == ["ok"], "addPermits(-1)")
    check(run(clients, *per, "available", url, name) == ["2"], "1 + 2 - 1")
    check(msgs.take(1) == [(ch, "2")] and msgs.rest() == [], "addPermits publishes N if > 0")

    tagged = "perm{tag}"
    run(clients, *per, "set_permits", url, tagged, 1)
    holder = clients.add(*per, "hold", url, tagged)
    tagged_id = holder.expect("acquired")[1]
    check(zset(raw, tagged + ":timeout") == [(bytes.fromhex(tagged_id), NEVER)],
          "tagged zset: no braces added")
    holder.send("\n")
    holder.expect("released")
    r.delete(name, tagged)
    note("permits: raw ids, deadlines, reclaim by acquire and availablePermits, releases")


def latch_layout(srv, clients):
    name, r, url = "latch-layout", srv.conn, srv.url
    ch = "redisson_countdownlatch__channel__{%s}" % name
    msgs = Messages(r, ch)
    lat = ("--kind", "latch")
    check(run(clients, *lat, "count", url, name) == ["0"], "getCount on none")
    lines = run(clients, *lat, "await", url, name)
    check(len(lines) == 1 and lines[0].startswith("opened "), "await on none: %r" % lines)
    check(run(clients, *lat, "latch_set", url, name, 2) == ["1"], "trySetCount")
    check(run(clients, *lat, "latch_set", url, name, 3) == ["0"], "trySetCount on a count")
    check(run(clients, *lat, "count", url, name) == ["2"], "getCount")
    check(msgs.take(1) == [(ch, "1")] and msgs.rest() == [], "trySetCount published 1 once")
    waiter = clients.add(*lat, "await", url, name)
    waiter.expect("waiting")
    check(subscribed(r, ch), "the waiter subscribed to " + ch)
    r.config_resetstat()
    r.publish(ch, "1")
    r.publish(ch, "2")
    silent(waiter, 0.5)
    gets = r.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
    check(gets == 0, "woken by 1 or 2: it read the count %d times" % gets)
    check(run(clients, *lat, "count_down", url, name) == ["ok"], "countDown")
    check(r.get(name) == "1", "count 1")
    silent(waiter, 0.5)
    check(run(clients, *lat, "count_down", url, name) == ["ok"], "countDown to 0")
    words = waiter.expect("opened")
    check(int(words[1]) >= 1000, "opened by the 0: %r" % words)
    check(r.exists(name) == 0, "the key went at 0")
    run(clients, *lat, "count_down", url, name)
    check(r.exists(name) == 0, "a count down on none leaves nothing")
    check([m for _, m in msgs.take(3)] + [m for _, m in msgs.rest()] == ["1", "2", "0"],
          "only the count down reaching 0 published (0)")
    check(run(clients, *lat, "latch_set", url, "latch-stuck", 1) == ["1"], "another latch")
    stuck = clients.add(*lat, "--timeout-s", "1", "await", url, "latch-stuck")
    stuck.expect("waiting")
    check(stuck.wait() == 3 and "timed out" in stuck.stderr(), "--timeout-s: exit 3")
    tagged = "latch{tag}"
    tagged_ch = "redisson_countdownlatch__channel__{%s}" % tagged
    tagged_msgs = Messages(r, tagged_ch)
    run(clients, *lat, "latch_set", url, tagged, 1)
    run(clients, *lat, "count_down", url, tagged)
    check(tagged_msgs.take(2) == [(tagged_ch, "1"), (tagged_ch, "0")], "tagged: braces kept")
    r.delete("latch-stuck")
    note("latch: count, messages, await opening on 0 only")


def fleet(srv, clients, tmp, kind, extra):
    """4 loops of `kind` on 2 permits for 3 s: at most 2 holds at once, 2 at once seen."""
    name = kind + "-fleet"
    run(clients, "--kind", kind, "set_permits", srv.url, name, 2)
    procs = []
    for i in range(4):
        log = os.path.join(tmp, "%s-%d.log" % (name, i))
        procs.append((clients.add("--kind", kind, *extra, "loop", srv.url, name, "--hold-ms",
                                  "3", "--duration-s", "3", "--log", log), log))
    for p, _ in procs:
        check(p.line(30) == "ready", "loop ready")
    for p, _ in procs:
        p.close_stdin()
    events, counts = [], []
    for p, log in procs:
        check(p.wait(40) == 0, "loop exit: " + p.stderr())
        counts.append(int(p.expect("count")[1]))
        with open(log) as f:
            for line in f:
                start, end = map(int, line.split())
                events += [(start, 1), (end, -1)]
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same ns
    held = most = 0
    for _, step in events:
        held += step
        most = max(most, held)
    check(most == 2, "%s: at most 2 holds at once, and 2 seen: %d" % (kind, most))
    check(min(counts) > 0 and sum(counts) == len(events) // 2, "every loop served: %r" % counts)
    check(srv.conn.get(name) == "2", "the counter back at 2")
    check(srv.conn.keys("*") == [name], "keys left: %r" % srv.conn.keys("*"))
    srv.conn.delete(name)
    note("%s fleet: %r acquisitions" % (kind, counts))


def semaphore_fleet(srv, clients, tmp):
    fleet(srv, clients, tmp, "semaphore", [])


def permits_fleet(srv, clients, tmp):
    fleet(srv, clients, tmp, "permits", ["--lease-ms", "10000"])


def main():
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="redisson_sync_check.") as tmp:
        try:
            srv = Server(tmp)
        except FileNotFoundError:
            print("redisson_sync_check.py: skipped: no redis-server")
            return 77
        clients = Clients()
        try:
            for check_fn in (semaphore_layout, permits_layout, latch_layout):
                check_fn(srv, clients)
                print("ok " + check_fn.__name__, flush=True)
            for check_fn in (semaphore_fleet, permits_fleet):
                check_fn(srv, clients, tmp)
                print("ok " + check_fn.__name__, flush=True)
            check(srv.conn.keys("*") == [], "keys left: %r" % srv.conn.keys("*"))
        except Failure as e:
            print("FAIL: " + str(e), flush=True)
            return 1
        finally:
            clients.kill_all()
            srv.stop()
    print("redisson_sync_check.py: all passed in %.1f s" % (time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
