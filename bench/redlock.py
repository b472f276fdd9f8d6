#!/usr/bin/python3
"""bench/redlock.py — dlock::red_lock against node-redlock in quorum mode over N = 3 and 5
independent local redis-servers (issue 27, part 5), with one server's floor of the same run as
the baseline. The ratios and the report are in bench/redlock_report.py.

  bench/redlock.py --bin build/release/bench --work DIR [--quick] [--reps 3] [--md FILE]
                   [--node-modules build/bench-node/node_modules]

Standalone, it runs only these measurements and writes their report (default DIR/redlock.md);
in scripts/bench's sitting, run.py's Runner starts the servers before its first repetition,
runs rep() in each (after W2), stops them at the end, and puts the section in
docs/benchmarks.md. It starts 5 redis-servers of its own on free loopback ports (`--save ''
--appendonly no`); N = 3 uses the first three. Per repetition and N (the N's in turn first):

- latency (W1's form): one process, one lock+unlock pair after the other on one name;
  floor-pair (bench/floor_pair.cpp: the mutex's two scripts over hiredis on server 1, one
  server), dlock-red-sync (red_lock lock()/unlock()), dlock-red-async (async_lock and
  multi_lease::async_unlock chained), node-redlock (`new Redlock([c1..cN])`, lock+unlock); in
  chunks, the systems alternating chunk by chunk;
- many names (W2's form): one process, 50 async lockers, each on a name of its own; the floor is
  `redis-benchmark -c 50 -P 1` of the mutex's two scripts on server 1 (as run.py's);
- one name (W3's form): PROCS processes, each try-lock (waiting), hold 1 ms, unlock, think 1 ms;
  floor-w3 (bench/floor_w3.cpp: the mutex's scripts and waiter protocol, with its wake-ups, on
  server 1), dlock-red (red_lock::try_lock_for), node-redlock (retrying as NODE_RETRY says).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import redis

sys.dont_write_bytecode = True
import redlock_report
from cluster import free_ports

NAN = float("nan")
NS = (3, 5)
SERVERS = 5
PROCS = 4  # processes on one name
HOLD_US = THINK_US = 1000
# node-redlock's retries while waiting (unlimited): retryDelay ± retryJitter, ms. 1 ± 1 is W3's
# (the hold time: its best case for a waiter's latency), 200 ± 100 redlock@4's default; a sweep
# on this host found no setting better than both (docs/bench/journal.md). The dlock ÷ node ratio
# takes the better of the two in each block; --quick runs the first only.
NODE_RETRY = {"node-redlock": (1, 1), "node-redlock-default": (200, 100)}
W1 = ("floor-pair", "dlock-red-sync", "dlock-red-async", "node-redlock")
W2 = ("dlock-red-async", "node-redlock")
W3 = ("floor-w3", "dlock-red", "node-redlock", "node-redlock-default")
SIZES = {
    "full": dict(reps=3, w1_n=4000, w1_chunks=2, w1_warmup=200, c50_acq_n=40000, c50_rel_n=20000,
                 c50_preload=200000, w2_s=3.0, w2_chunks=2, w3_s=5.0, start_delay=1.5),
    "quick": dict(reps=1, w1_n=300, w1_chunks=1, w1_warmup=50, c50_acq_n=3000, c50_rel_n=2000,
                  c50_preload=20000, w2_s=0.5, w2_chunks=1, w3_s=1.0, start_delay=0.8),
}


class Servers:
    """SERVERS redis-servers on free loopback ports, each in a temporary directory; stopped by
    PID, each one this object started."""

    def __init__(self, work):
        self.work, self.procs, self.ports, self.dirs = work, [], [], []

    def start(self, timeout=30.0):
        for _ in range(3):  # a free port may be taken before the server binds it: new ports
            try:
                return self._spawn(time.monotonic() + timeout)
            except (OSError, RuntimeError) as e:
                last = e
                self.stop()
        raise RuntimeError("the redis-servers did not start: %s" % last)

    def _spawn(self, deadline):
        self.ports = free_ports(SERVERS)
        for port in self.ports:
            d = tempfile.mkdtemp(prefix="redlock-%d-" % port, dir=self.work)
            self.dirs.append(d)
            self.procs.append(subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", d, "--logfile", os.path.join(d, "redis.log"), "--daemonize", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port, p in zip(self.ports, self.procs):
            while True:
                try:
                    if redis.Redis(port=port, socket_timeout=1).ping():
                        break
                except redis.ConnectionError:
                    pass
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server on port %d did not start" % port)
                time.sleep(0.02)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        self.procs, self.ports, self.dirs = [], [], []

    def r(self, i=0):
        return redis.Redis(host="127.0.0.1", port=self.ports[i])


class RedlockBench(redlock_report.Report):
    """lib: run.py's module (Runner's helpers, the scripts' keys, cell, pct, jain...); passed in,
    not imported, since run.py runs as __main__."""

    def __init__(self, runner, lib):
        self.runner, self.lib, self.res = runner, lib, runner.res
        self.size = SIZES["quick" if runner.a.quick else "full"]
        self.servers = Servers(runner.a.work)
        self.cur = {}  # this repetition's numbers, by N

    def start(self):
        self.servers.start()

    def stop(self):
        self.servers.stop()

    def up(self):
        return bool(self.servers.ports)

    # ---- one repetition ------------------------------------------------------------------------

    def rep(self, rep):
        """Every measurement of one repetition, each N in one block (its floors too)."""
        if not self.up():
            return
        run, size = self.runner, self.size
        rot = lambda xs, k: xs[k % len(xs):] + xs[:k % len(xs)]
        self.cur = {}
        for n in rot(list(NS), rep):
            for i in range(SERVERS):
                self.servers.r(i).flushall()
            for chunk in range(size["w1_chunks"]):
                for s in rot(list(W1), chunk + rep):
                    run.step("red_lock N=%d latency %s (chunk %d)" % (n, s, chunk + 1), self.w1, s, n, rep, chunk)
            run.step("red_lock N=%d floor: -c 50 -P 1 scripts" % n, self.floor_c50, n)
            for chunk in range(size["w2_chunks"]):
                for s in rot(list(W2), chunk + rep):
                    run.step("red_lock N=%d many names %s (chunk %d)" % (n, s, chunk + 1), self.w2, s, n, rep, chunk)
            for s in rot(list(W3[:3] if run.a.quick else W3), rep):
                run.step("red_lock N=%d one name %s" % (n, s), self.w3, s, n, rep)
            run.step("red_lock N=%d statistics" % n, self.finish, n)

    def urls(self, n):
        return ",".join("redis://127.0.0.1:%d" % p for p in self.servers.ports[:n])

    def ports(self, n):
        return ",".join(str(p) for p in self.servers.ports[:n])

    def node(self, workload, n):
        return ["node", os.path.join(self.lib.HERE, "peers", "redlock_peer.js"), workload, "--ports", self.ports(n)]

    def w1(self, system, n, rep, chunk):
        run, size = self.runner, self.size
        n_pairs = str(max(100, size["w1_n"] // size["w1_chunks"]))
        path = os.path.join(run.a.work, "samples", "red-w1-%s-n%d-r%d-c%d.txt" % (system, n, rep, chunk))
        common = ["--iterations", n_pairs, "--warmup", str(size["w1_warmup"]), "--samples", path]
        if system == "floor-pair":
            cmd = [run.bin("dlock_floor_pair"), "--port", str(self.servers.ports[0])]
        elif system == "node-redlock":
            cmd = self.node("w1", n)
        else:
            cmd = [run.bin("dlock_load"), "w1", "--kind", "red", "--urls", self.urls(n), "--mode",
                   system.rsplit("-", 1)[1], "--name", "bench:red:w1:r%d:c%d" % (rep, chunk)]
        out = json.loads(run.run_json(cmd + common, 300, env=run.node_env if system == "node-redlock" else None))
        acc = self.cur.setdefault(n, {}).setdefault(("w1", system), [[], 0])
        acc[0].append(path)
        acc[1] += out.get("errors", 0)

    def floor_c50(self, n):
        """`redis-benchmark -c 50 -P 1` of the mutex's acquire script on fresh names, then of its
        release on held locks, on server 1 (run.py's floor_c50, smaller); a pair costs the sum."""
        lib, size, r = self.lib, self.size, self.servers.r(0)
        shas = {k: r.script_load(lib.lua_text(k)) for k in ("mutex_acquire", "mutex_release")}
        shas = {k: v.decode() if isinstance(v, bytes) else v for k, v in shas.items()}
        keys = lib.lock_keys("bench:floor:lock:__rand_int__")
        keys[4] = lib.slot_fencing_counter_of("bench:floor:lock")
        acq = self.redis_benchmark(["-n", str(size["c50_acq_n"]), "-r", "1000000000", "EVALSHA", shas["mutex_acquire"],
                                    str(len(keys))] + keys + [lib.LEASE_MS, lib.OWNER, "0", lib.TICKET, lib.VALID_MS,
                                                              lib.CLIENT_ID, "0"])
        r.flushall()
        r.eval("for i = 0, tonumber(ARGV[1]) - 1 do redis.call('hset', string.format('bench:floor:held:%012d', i), "
               "ARGV[2], '1') end return 1", 0, size["c50_preload"], lib.OWNER)
        keys = lib.lock_keys("bench:floor:held:__rand_int__")
        keys[4] = lib.slot_fencing_counter_of("bench:floor:held")
        rel = self.redis_benchmark(["-n", str(size["c50_rel_n"]), "-r", str(size["c50_preload"]), "EVALSHA",
                                    shas["mutex_release"], str(len(keys))] + keys +
                                   ["redisson_lock__channel:{bench:floor:held:__rand_int__}",
                                    "dlock_lock__channel:{bench:floor:held:__rand_int__}", lib.OWNER, "1", lib.LEASE_MS,
                                    "", lib.YIELD_MS])
        r.flushall()
        self.cur.setdefault(n, {})["c50_pairs"] = 1.0 / (1.0 / acq + 1.0 / rel)

    def redis_benchmark(self, args):
        rows = self.runner.redis_benchmark(["-c", "50", "-P", "1"] + args, port=self.servers.ports[0])
        return list(rows.values())[0]["rps"]

    def w2(self, system, n, rep, chunk):
        run, size = self.runner, self.size
        seconds = size["w2_s"] / size["w2_chunks"]
        common = ["--lockers", "50", "--seconds", str(seconds), "--start-at", str(self.start_at()),
                  "--prefix", "bench:red:w2:%s:r%d:c%d" % (system, rep, chunk)]
        if system == "node-redlock":
            cmd, env = self.node("w2", n), run.node_env
        else:
            cmd, env = [run.bin("dlock_load"), "w2", "--kind", "red", "--urls", self.urls(n)], None
        out = run.run_group([cmd + common], seconds + 60, env=env)[0]
        acc = self.cur.setdefault(n, {}).setdefault(("w2", system), [0, 0.0, 0, 0.0])
        for i, k in enumerate(("pairs", "seconds", "errors", "cpu_s")):
            acc[i] += out[k]

    def w3(self, system, n, rep):
        run, seconds = self.runner, self.size["w3_s"]
        at = self.start_at()
        cmds = []
        for i in range(PROCS):
            common = ["--name", "bench:red:w3:%s:r%d" % (system, rep), "--hold-us", str(HOLD_US), "--think-us",
                      str(THINK_US), "--seconds", str(seconds), "--start-at", str(at), "--id", str(i)]
            if system == "floor-w3":
                cmds.append([run.bin("dlock_floor_w3"), "--host", "127.0.0.1", "--port", str(self.servers.ports[0])] + common)
            elif system == "dlock-red":
                cmds.append([run.bin("dlock_load"), "w3", "--kind", "red", "--urls", self.urls(n)] + common)
            else:
                delay, jitter = NODE_RETRY[system]
                cmds.append(self.node("w3", n) + ["--poll-ms", str(delay), "--jitter-ms", str(jitter)] + common)
        before = self.scripts_run(n)
        outs = run.run_group(cmds, seconds + 60, env=run.node_env if system.startswith("node") else None)
        st = self.w3_stats(outs)
        st["scripts_per_acq"] = (self.scripts_run(n) - before) / st["acquisitions"] if st["acquisitions"] else NAN
        self.cur.setdefault(n, {})[("w3", system)] = st

    def scripts_run(self, n):
        """Scripts the first n servers ran so far (EVALSHA and EVAL calls, INFO commandstats)."""
        total = 0
        for i in range(n):
            stats = self.servers.r(i).info("commandstats")
            total += sum(stats.get("cmdstat_" + c, {}).get("calls", 0) for c in ("evalsha", "eval"))
        return total

    def start_at(self):
        return time.monotonic_ns() + int(self.size["start_delay"] * 1e9)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True, help="directory of dlock_load, dlock_floor_pair, dlock_floor_w3")
    p.add_argument("--work", required=True, help="scratch directory (servers, samples)")
    p.add_argument("--reps", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--md", default=None, help="the report (default WORK/redlock.md)")
    p.add_argument("--node-modules", default="")
    a = p.parse_args()
    import run as lib  # run.py's Runner: run_json, run_group, step, redis_benchmark, res
    a.port, a.skip_node, a.skip_redis_py = 0, "" if a.node_modules else "no --node-modules", "standalone"
    os.makedirs(a.work, exist_ok=True)
    t0 = time.monotonic()
    runner = lib.Runner(a)
    bench = runner.redlock
    reps = a.reps or bench.size["reps"]
    runner.load_avgs = [os.getloadavg()]
    try:
        runner.step("red_lock: start %d redis-servers" % SERVERS, bench.start)
        for rep in range(reps):
            lib.log("repetition %d of %d" % (rep + 1, reps))
            bench.rep(rep)
            runner.load_avgs.append(os.getloadavg())
        versions = bench.versions()
    finally:
        bench.stop()
    md = os.path.abspath(a.md or os.path.join(a.work, "redlock.md"))
    with open(md, "w") as f:
        f.write(bench.standalone_report(time.monotonic() - t0, reps, versions))
    lib.log("report: %s" % md)
    problems = ["step failed: " + e for e in runner.res.errors] + bench.problems() + bench.missing()
    if problems:
        lib.loud("%d problem(s):\n" % len(problems) + "\n".join("   - " + x for x in problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
