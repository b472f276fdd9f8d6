#!/usr/bin/python3
"""redis-py's Lock (Debian python3-redis) on scripts/bench's workloads W1-W3.

Same workloads and JSON output as dlock's drivers (bench/pair_bench.cpp, bench/load.cpp), so
bench/run.py treats every system alike. Run with Debian's /usr/bin/python3.

  redis_py_peer.py w1 --port P [--iterations 20000] [--warmup 500] [--samples FILE] [--names A,B]
  redis_py_peer.py w2 --port P --lockers 50 --seconds S [--start-at NS] [--prefix P]
  redis_py_peer.py w3 --port P --name N --hold-us 1000 --think-us 1000 --seconds S
                      [--start-at NS] [--id K] [--poll 0.001]

--cluster H:P,H:P,... runs on a Redis Cluster (redis.cluster.RedisCluster, those nodes as seeds)
instead of the server at --port. --names: W1's pairs cycle over these names (each suffixed with
the pid), one pair per name in turn; on a cluster the bench gives one hash tag per master.

Locks are taken with a 30 s timeout (the lease; dlock's watchdog lease is 30 s too). A waiting
acquire() polls every --poll seconds (redis-py's default is 0.1 s; the bench passes 1 ms, the
hold time: the peer's best case for latency, paid for with commands).
Timestamps are time.monotonic_ns(): CLOCK_MONOTONIC, the clock every process on the host shares.
"""
import argparse
import json
import os
import sys
import threading
import time

import redis


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def start_line(at_ns):
    if at_ns > 0:
        delay = (at_ns - time.monotonic_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        return max(at_ns, time.monotonic_ns())
    return time.monotonic_ns()


HOLD_SPIN_NS = 150_000


def hold_until(end_ns):
    """Returns when time.monotonic_ns() reads end_ns: sleeps until HOLD_SPIN_NS before it, then
    reads the clock (as bench/common.hpp's hold_until_ns: W3's hold lasts what the workload says,
    not what a sleep's wake-up makes of it)."""
    left = end_ns - time.monotonic_ns()
    if left > HOLD_SPIN_NS:
        time.sleep((left - HOLD_SPIN_NS) / 1e9)
    while time.monotonic_ns() < end_ns:
        pass


def percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), int(-(-q * len(sorted_values) // 1))))
    return sorted_values[rank - 1]


def client(a):
    if a.cluster:
        from redis.cluster import ClusterNode, RedisCluster
        seeds = [ClusterNode(h, int(p)) for h, p in (s.rsplit(":", 1) for s in a.cluster.split(","))]
        return RedisCluster(startup_nodes=seeds)
    return redis.Redis(host=a.host, port=a.port)


def w1(a):
    r = client(a)
    bases = [n for n in a.names.split(",") if n] or ["bench:w1:redispy"]
    locks = [r.lock("%s:%d" % (b, os.getpid()), timeout=30) for b in bases]
    for i in range(a.warmup):
        lock = locks[i % len(locks)]
        lock.acquire()
        lock.release()
    us = []
    for i in range(a.iterations):
        lock = locks[i % len(locks)]
        t0 = time.monotonic_ns()
        if not lock.acquire():
            raise RuntimeError("acquire failed")
        lock.release()
        us.append((time.monotonic_ns() - t0) / 1e3)
    if a.samples:
        with open(a.samples, "w") as f:
            f.write("".join("%.2f\n" % v for v in us))
    s = sorted(us)
    emit({"system": "redis-py", "n": len(us), "p50_us": percentile(s, 0.5),
          "p99_us": percentile(s, 0.99), "mean_us": sum(us) / len(us), "min_us": s[0],
          "max_us": s[-1]})


def w2(a):
    r = client(a)
    prefix = a.prefix or "bench:w2:redispy:%d" % os.getpid()
    counts = [0] * a.lockers
    errors = [0] * a.lockers
    locks = [r.lock("%s:%d" % (prefix, i), timeout=30) for i in range(a.lockers)]
    for lk in locks:  # open the connections before the start line
        lk.acquire()
        lk.release()
    t0 = start_line(a.start_at)
    deadline = t0 + int(a.seconds * 1e9)
    cpu0 = time.process_time()  # every thread's

    def run(i):
        lk = locks[i]
        while time.monotonic_ns() < deadline:
            try:
                lk.acquire()
                lk.release()
                counts[i] += 1
            except redis.RedisError:
                errors[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(a.lockers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = (time.monotonic_ns() - t0) / 1e9
    emit({"system": "redis-py", "lockers": a.lockers, "pairs": sum(counts), "seconds": secs,
          "pairs_per_s": sum(counts) / secs, "errors": sum(errors), "cpu_s": time.process_time() - cpu0})


def w3(a):
    r = client(a)
    lock = r.lock(a.name, timeout=30, sleep=a.poll)
    r.ping()
    t0 = start_line(a.start_at)
    deadline = t0 + int(a.seconds * 1e9)
    events = []
    errors = 0
    while True:
        call = time.monotonic_ns()
        if call >= deadline:
            break
        try:
            if not lock.acquire(blocking_timeout=(deadline - call) / 1e9):
                break
        except redis.RedisError:
            errors += 1
            continue
        acquired = time.monotonic_ns()
        hold_until(acquired + a.hold_us * 1000)
        unlock_call = time.monotonic_ns()
        try:
            lock.release()
        except redis.RedisError:
            errors += 1
        unlocked = time.monotonic_ns()
        events.append([call, acquired, unlock_call, unlocked])
        time.sleep(a.think_us / 1e6)
    emit({"system": "redis-py", "id": a.id, "start": t0, "deadline": deadline, "errors": errors,
          "events": events})


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=["w1", "w2", "w3"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cluster", default="")
    p.add_argument("--names", default="")
    p.add_argument("--iterations", type=int, default=20000)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--samples", default="")
    p.add_argument("--lockers", type=int, default=50)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--start-at", type=int, default=0)
    p.add_argument("--prefix", default="")
    p.add_argument("--name", default="bench:w3:redispy")
    p.add_argument("--hold-us", type=int, default=1000)
    p.add_argument("--think-us", type=int, default=1000)
    p.add_argument("--id", type=int, default=0)
    p.add_argument("--poll", type=float, default=0.001)
    a = p.parse_args()
    if not a.port and not a.cluster:
        p.error("--port or --cluster is required")
    {"w1": w1, "w2": w2, "w3": w3}[a.workload](a)


if __name__ == "__main__":
    main()
