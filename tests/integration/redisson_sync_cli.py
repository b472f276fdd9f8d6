"""The commands of redisson_client.py --kind semaphore|permits|latch (see its usage), on the
objects of redisson_sync.py."""

import re
import sys
import time

from redisson_sync import CountDownLatch, PermitSemaphore, Semaphore

SYNC_KINDS = ("semaphore", "permits", "latch")

# Per kind: each command and the number of arguments after URL NAME.
COMMANDS = {
    "semaphore": {"hold": 0, "acquire_wait": 0, "loop": 0, "set_permits": 1, "add_permits": 1,
                  "available": 0, "release": 1},
    "permits": {"hold": 0, "acquire_wait": 0, "loop": 0, "set_permits": 1, "add_permits": 1,
                "available": 0, "release_id": 1},
    "latch": {"latch_set": 1, "count_down": 0, "count": 0, "await": 0},
}


def usage(kind):
    return "usage: redisson_client.py --kind %s [options] (%s) URL NAME [N|HEXID]" % (
        kind, "|".join(COMMANDS[kind]))


def parse(kind, args, die):
    """(command, url, name, its argument or None), or die(2)."""
    if not args or args[0] not in COMMANDS[kind] or len(args) != 3 + COMMANDS[kind][args[0]]:
        die(2, usage(kind))
    extra = args[3] if len(args) == 4 else None
    if args[0] == "release_id":
        if not re.fullmatch(r"(?:[0-9a-fA-F]{2})+", extra):
            die(2, "release_id: the permit id must be hex digits, not " + extra)
    elif extra is not None:
        if not re.fullmatch(r"-?[0-9]+", extra):
            die(2, args[0] + ": N must be an integer, not " + extra)
        extra = int(extra)
        if args[0] == "release" and extra < 0:
            die(2, "release: N can't be negative (as RSemaphore.release)")
    return args[0], args[1], args[2], extra


def make(kind, conn, name, cluster, lease_ms):
    if kind == "semaphore":
        return Semaphore(conn, name, cluster)
    if kind == "permits":
        return PermitSemaphore(conn, name, cluster, lease_ms)
    return CountDownLatch(conn, name, cluster)


def loop(sem, opts, say):
    """acquire(), hold, release until duration_s passed; prints "count <acquisitions>"."""
    pubsub = sem.new_pubsub()  # one for this process's waits, as Redisson keeps its own
    holds = []
    sem.conn.ping()  # connected
    say("ready")
    sys.stdin.read()  # EOF: go (several processes start together)
    end = time.monotonic() + opts.duration_s
    while time.monotonic() < end:
        got = sem.acquire(max(end - time.monotonic(), 0.001), pubsub=pubsub)
        if got is None:
            break  # still waiting when the run ended
        start = time.monotonic_ns()
        time.sleep(opts.hold_ms / 1000.0)
        holds.append((start, time.monotonic_ns()))
        sem.give_back(got)
        if opts.pause_ms > 0:
            time.sleep(opts.pause_ms / 1000.0)
    pubsub.close()
    if opts.log_path:
        with open(opts.log_path, "a") as f:
            f.write("".join("%d %d\n" % h for h in holds))
    say("count " + str(len(holds)))
    return 0


def run(kind, args, opts, connect, say, die):
    """Runs one command. `opts` has lease_ms (None when not given), timeout_s, stamp, hold_ms,
    pause_ms, duration_s, log_path and cluster; connect(url) gives the connection."""
    command, url, name, extra = parse(kind, args, die)
    obj = make(kind, connect(url), name, opts.cluster, opts.lease_ms)
    # --stamp: the line ends with the CLOCK_MONOTONIC ns at which the wait returned.
    stamp = (lambda ns: " " + str(ns)) if opts.stamp else (lambda ns: "")

    if command in ("set_permits", "latch_set"):
        setter = obj.try_set_count if kind == "latch" else obj.try_set_permits
        say(str(setter(extra)))
    elif command == "add_permits":
        obj.add_permits(extra)
        say("ok")
    elif command == "available":
        say(str(obj.available()))
    elif command == "release":
        obj.release(extra)
        say("ok")
    elif command == "release_id":
        say(str(obj.try_release(extra)))
    elif command == "count_down":
        obj.count_down()
        say("ok")
    elif command == "count":
        say(str(obj.count()))
    elif command == "await":
        started = time.monotonic()
        if not obj.wait_open(opts.timeout_s, on_waiting=lambda: say("waiting")):
            die(3, "timed out waiting for " + name + " to open")
        opened_ns = time.monotonic_ns()
        say("opened " + str(int((time.monotonic() - started) * 1000)) + stamp(opened_ns))
    elif command == "loop":
        return loop(obj, opts, say)
    elif command == "hold":
        got = obj.acquire(opts.timeout_s)
        if got is None:
            die(3, "timed out waiting for a permit of " + name)
        say("acquired " + got)
        sys.stdin.readline()  # a line, or EOF when the test closes its end (or dies)
        say("released " + str(obj.give_back(got)))
    else:  # acquire_wait
        started = time.monotonic()
        got = obj.acquire(opts.timeout_s, on_waiting=lambda: say("waiting"))
        if got is None:
            die(3, "timed out waiting for a permit of " + name)
        acquired_ns = time.monotonic_ns()
        waited_ms = int((time.monotonic() - started) * 1000)
        say("acquired " + str(waited_ms) + " " + got + stamp(acquired_ns))
        say("released " + str(obj.give_back(got)))
    return 0
