#!/usr/bin/python3
"""bench/run.py — runs every workload of scripts/bench against one redis-server, in one sitting,
and writes the report (docs/benchmarks.md) and its plots. scripts/bench starts the server,
builds the programs and installs the peers; this file does the measuring.

  run.py --port P --bin build/release/bench --work DIR [--reps 3] [--quick]
         [--md docs/benchmarks.md] [--plots docs/bench] [--findings bench/findings.md]
         [--node-modules build/bench-node/node_modules | --skip-node REASON]
         [--skip-redis-py REASON]

Each repetition measures the floor (redis-benchmark PING -c 1, the hiredis pair, redis-benchmark
-c 50 -P 1 of the two scripts, and before W3 a PING after a W3 hold) and then W1..W6, the systems
of each workload in a different order in every repetition (W1 and W2 in chunks, the order turning
chunk by chunk). Ratios are taken within a repetition (same server, same minute) and reported as
the median over repetitions with the min-max spread.

W1 and W2 also run on a local Redis Cluster of 3 masters and 3 replicas (bench/cluster.py starts
it, bench/cluster_bench.py sums it up), its chunks in the same rotation as the single server's.
fair_mutex runs W3 and shared_mutex a W2 on one name beside the mutex, both W6 (bench/family.py);
leased_semaphore's permits run W1 and W2, and `dlock exec --permits` is timed (bench/semaphores.py).
red_lock runs against node-redlock over 3 and 5 redis-servers of its own, each repetition after W2
(bench/redlock.py, which also runs on its own).

--quick: one repetition with small counts; writes the report and plots under --work unless
--md/--plots say otherwise, and exits 1 unless every workload ran and produced numbers (their
values are not judged).
"""
import argparse
import binascii
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

import redis

sys.dont_write_bytecode = True  # the modules below are bench/'s own: no __pycache__ in the tree
import cluster_bench
import family
import redlock
import semaphores
from cluster import CLUSTER

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LUA = os.path.join(ROOT, "src", "scripts", "lua")


def lua_text(name):
    """src/scripts/lua/<name>.lua with its `-- dlock:include <lib>` lines replaced by
    lib/<lib>.lua, as cmake/dlock_embed_lua.cmake embeds it."""
    with open(os.path.join(LUA, name + ".lua"), "rb") as f:
        text = f.read()
    return re.sub(rb"-- dlock:include ([a-z_]+)\n",
                  lambda m: open(os.path.join(LUA, "lib", m.group(1).decode() + ".lua"), "rb").read(), text)


CLIENT_ID = "0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c"  # as a dlock client id
OWNER = CLIENT_ID + ":1"  # as long as a dlock owner field
TICKET = "5302428712241725441"  # a waiter ticket of the usual length (a 31-bit tag over a counter)
LEASE_MS = "30000"  # the default watchdog lease (config::watchdog_lease)
VALID_MS = "4000"  # a queue record's validity: the default re-check (3 s) plus a second
YIELD_MS = "20"  # waiter_registry::yield_window


def crc16(data):
    """CRC16/XMODEM, as Redis Cluster hashes keys (src/keys.cpp): binascii's CRC-CCITT from 0,
    in C (the cluster's W2 hashes thousands of names to spread them)."""
    return binascii.crc_hqx(data, 0)


def key_slot(key):
    """The cluster slot of a key (its hash tag's, when it has a non-empty one)."""
    k = key.encode()
    o = k.find(b"{")
    if o >= 0:
        c = k.find(b"}", o + 1)
        if c > o + 1:
            k = k[o + 1:c]
    return crc16(k) % 16384


def slot_fencing_counter_of(name):
    """keys::slot_fencing_counter_of(name): `dlock_fencing:{<tag>}`, the tag the first string over
    [0-9a-z] (shortest first, then in order) that hashes to the name's slot."""
    want, alphabet = key_slot(name), "0123456789abcdefghijklmnopqrstuvwxyz"
    tags = [""]
    while True:
        tags = [t + c for t in tags for c in alphabet]
        for t in tags:
            if crc16(t.encode()) % 16384 == want:
                return "dlock_fencing:{%s}" % t


def lock_keys(name):
    """The KEYS of mutex_acquire.lua and mutex_release.lua for lock `name` (fencing on):
    the lock, its waiter queue and records, its yield marker, the slot's counter and
    RFencedLock's counter of the name (dlock/keys.hpp, for a name without a hash tag)."""
    return [name, "dlock_lock_queue:{%s}" % name, "dlock_lock_records:{%s}" % name,
            "{%s}:dlock_yield" % name, slot_fencing_counter_of(name), "redisson_lock_token:{%s}" % name]
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# Commands that INFO commandstats counts per subcommand (`cmdstat_pubsub|numsub`).
CONTAINER_COMMANDS = {"pubsub", "client", "config", "script", "object", "memory", "function",
                      "cluster", "command", "acl", "xinfo", "latency", "slowlog"}


# Scripts no workload runs, so none of their commands can show in the counts: `dlock status`'
# snapshot (it reads through a redis.pcall(...) wrapper, which the check below would refuse).
NOT_RUN = {"lock_inspect.lua"}


def script_commands():
    """Every command dlock's scripts call (redis.call / redis.pcall with a literal name), read
    from the scripts themselves so that the list cannot fall behind them, as INFO commandstats
    names them (`pubsub|numsub` for a subcommand). A call whose name is not a single-quoted
    literal would be missed: the scripts must not have one."""
    names = set()
    for f in sorted(os.listdir(LUA)) + ["lib/" + f for f in sorted(os.listdir(os.path.join(LUA, "lib")))]:
        if f.endswith(".lua") and f not in NOT_RUN:
            with open(os.path.join(LUA, f)) as fh:
                text = fh.read()
            for cmd, sub in re.findall(r"redis\.p?call\(\s*'([a-z|]+)'(?:\s*,\s*'([a-z]+)')?", text):
                names.add(cmd + "|" + sub if cmd in CONTAINER_COMMANDS and sub else cmd)
            literal = len(re.findall(r"redis\.p?call\(\s*'[a-z|]+'", text))
            if literal != len(re.findall(r"redis\.p?call\(", text)):
                raise SystemExit("bench/run.py: %s calls a command whose name is not a literal" % f)
    return names


# Commands each system's Lua scripts run inside Redis: INFO commandstats counts them too, but
# no client sent them. W3 and W4 count the commands clients send (the rest, minus INFO).
SCRIPT_INTERNAL = {
    "dlock": script_commands(),
    "floor-w3": script_commands(),                   # dlock's own scripts (bench/floor_w3.cpp)
    "redis-py": {"get", "del"},                      # release script; acquire is a plain SET NX PX
    "node-redlock": {"exists", "set", "get", "del"},  # lock and unlock scripts
}


def commands_sent(before, after, system):
    """Commands clients sent between two INFO commandstats snapshots: {command: calls}."""
    out = {}
    for cmd, v in after.items():
        d = v["calls"] - before.get(cmd, {}).get("calls", 0)
        if d and cmd != "info" and cmd not in SCRIPT_INTERNAL[system]:
            out[cmd] = d
    return out

SIZES = {
    "full": dict(reps=3, w1_chunks=4, ping_n=20000, c50_acq_n=100000, c50_rel_n=50000,
                 c50_preload=1000000, w1_n=20000, w1_warmup=500, idle_ping_n=2000, w2_s=3.0, w2_chunks=3,
                 w3_s=10.0, w4_s=10.0, w4_margin=2.0,
                 w5_locks=10000, w5_watchdog="1500ms", w6_locks=100000, start_delay=1.5, diag_n=5000,
                 diag_scaling=(5000, 10000, 20000)),
    "quick": dict(reps=1, w1_chunks=1, ping_n=2000, c50_acq_n=5000, c50_rel_n=5000,
                  c50_preload=100000, w1_n=2000, w1_warmup=100, idle_ping_n=200, w2_s=0.5, w2_chunks=1,
                  w3_s=1.5, w4_s=1.5, w4_margin=0.3,
                  w5_locks=1000, w5_watchdog="900ms", w6_locks=5000, start_delay=1.0, diag_n=1000,
                  diag_scaling=(1000, 2000, 4000)),
}


class BenchError(Exception):
    pass


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


def loud(msg):
    bar = "!" * 78
    sys.stderr.write("\n%s\n!! %s\n%s\n\n" % (bar, msg, bar))
    sys.stderr.flush()


def mono_ns():
    return time.monotonic_ns()


def pct(values, q):
    """Nearest-rank percentile (the same rule as bench/common.hpp)."""
    if not values:
        return float("nan")
    s = sorted(values)
    rank = max(1, min(len(s), math.ceil(q * len(s))))
    return s[rank - 1]


def jain(counts):
    counts = [c for c in counts]
    if not counts or sum(counts) == 0:
        return float("nan")
    return sum(counts) ** 2 / (len(counts) * sum(c * c for c in counts))


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class Results:
    """results[workload][system][metric] -> one value per repetition."""

    def __init__(self):
        self.data = {}
        self.errors = []

    def put(self, workload, system, metric, value):
        self.data.setdefault(workload, {}).setdefault(system, {}).setdefault(metric, []).append(value)

    def get(self, workload, system, metric):
        return self.data.get(workload, {}).get(system, {}).get(metric, [])

    def med(self, workload, system, metric):
        v = [x for x in self.get(workload, system, metric) if finite(x)]
        return statistics.median(v) if v else float("nan")

    def spread(self, workload, system, metric):
        v = [x for x in self.get(workload, system, metric) if finite(x)]
        return (min(v), max(v)) if v else (float("nan"), float("nan"))


class Runner:
    def __init__(self, a):
        self.a = a
        self.size = dict(SIZES["quick" if a.quick else "full"])
        if a.reps:
            self.size["reps"] = a.reps
        self.r = redis.Redis(host="127.0.0.1", port=a.port)
        self.url = "redis://127.0.0.1:%d" % a.port
        self.res = Results()
        self.samples = {}  # ("w1", system) -> sample files of every chunk and repetition
        self.w3_raw = {}   # system -> {"wait": [...], "handoff": [...]} of the last repetition
        self.w2_best_peers = {}  # procs -> the best peer of each repetition
        self.cur = {}      # this repetition's floor: rtt_us, pair_p50, pair_p99, c50_pairs
        self.node_env = None
        self.timer_slack = False  # set by main(): PR_SET_TIMERSLACK taken
        if a.node_modules:
            self.node_env = dict(os.environ, NODE_PATH=os.path.abspath(a.node_modules))
        os.makedirs(os.path.join(a.work, "samples"), exist_ok=True)
        self.cluster = cluster_bench.ClusterBench(self, sys.modules[__name__])
        self.family = family.FamilyBench(self, sys.modules[__name__])
        self.semaphores = semaphores.SemaphoreBench(self, sys.modules[__name__])
        self.redlock = redlock.RedlockBench(self, sys.modules[__name__])

    # ---- helpers ------------------------------------------------------------------------------

    def bin(self, name):
        return os.path.join(self.a.bin, name)

    def peers(self):
        out = []
        if not self.a.skip_redis_py:
            out.append("redis-py")
        if self.node_env is not None:
            out.append("node-redlock")
        return out

    def run_json(self, cmd, timeout, env=None):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise BenchError("%s timed out after %ss" % (" ".join(cmd[:3]), timeout))
        if p.returncode != 0:
            raise BenchError("%s exited %d: %s" % (" ".join(cmd[:3]), p.returncode,
                                                   (p.stderr or p.stdout)[-1500:].strip()))
        return p.stdout

    def run_group(self, cmds, timeout, env=None):
        """Starts every command at once; returns their parsed JSON outputs."""
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env) for c in cmds]
        outs, failed = [], None
        deadline = time.monotonic() + timeout
        for p, c in zip(procs, cmds):
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                failed = failed or "%s timed out" % " ".join(c[:3])
                continue
            if p.returncode != 0:
                failed = failed or "%s exited %d: %s" % (" ".join(c[:3]), p.returncode, err[-1500:].strip())
                continue
            outs.append(json.loads(out.strip().splitlines()[-1]))
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if failed:
            raise BenchError(failed)
        return outs

    def start_at(self):
        return mono_ns() + int(self.size["start_delay"] * 1e9)

    def commandstats(self):
        return {k[len("cmdstat_"):]: v for k, v in self.r.info("commandstats").items()}

    def errorstats(self):
        out = {}
        for k, v in self.r.info("errorstats").items():
            if isinstance(v, dict):
                out[k] = int(v.get("count", 0))
            else:
                out[k] = int(str(v).split("=", 1)[1])
        return out

    def flush(self):
        self.r.flushall()

    # ---- the floor ----------------------------------------------------------------------------

    def redis_benchmark(self, args, timeout=300, port=None):
        out = self.run_json(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port or self.a.port), "--csv"] + args,
                            timeout)
        rows = {}
        lines = [l for l in out.splitlines() if l.startswith('"')]
        header = [h.strip('"') for h in lines[0].split('","')]
        for line in lines[1:]:
            cells = [c.strip('"') for c in line.split('","')]
            rows[cells[0]] = dict(zip(header[1:], (float(c) for c in cells[1:])))
        return rows

    def floor_ping(self, rep, chunk):
        """One chunk of `redis-benchmark -c 1` PINGs; the repetition's RTT is the median of the
        chunks' p50s (redis-benchmark reports percentiles, not samples)."""
        n = max(1000, self.size["ping_n"] // self.size["w1_chunks"])
        rows = self.redis_benchmark(["-c", "1", "-n", str(n), "-t", "ping"])
        self.ping_chunks.append((rows["PING_INLINE"]["p50_latency_ms"] * 1000,
                                 rows["PING_MBULK"]["p50_latency_ms"] * 1000))

    def floor_idle_ping(self, rep):
        """A PING sent after a W3 hold (the server idle for 1 ms, as before W3's unlock) and one at
        once after it (bench/floor_ping.cpp). Not a target's input: it explains W3's rate."""
        o = json.loads(self.run_json([self.bin("dlock_floor_ping"), "--host", "127.0.0.1", "--port",
                                      str(self.a.port), "--iterations", str(self.size["idle_ping_n"]),
                                      "--hold-us", "1000"], 300))
        for k in ("after_hold_p50_us", "after_hold_p99_us", "back_to_back_p50_us"):
            self.res.put("floor", "idle-ping", k, float(o[k]))
        self.cur["rtt_after_hold_us"] = float(o["after_hold_p50_us"])

    def load_scripts(self):
        """The scripts as the library embeds them (lua_text), loaded; their SHA1s checked."""
        shas = {}
        for name in ("mutex_acquire", "mutex_release"):
            text = lua_text(name)
            sha = self.r.script_load(text)
            if isinstance(sha, bytes):
                sha = sha.decode()
            if sha != hashlib.sha1(text).hexdigest():
                raise BenchError("SCRIPT LOAD %s: unexpected SHA %s" % (name, sha))
            shas[name] = sha
        return shas

    def floor_c50(self, rep):
        """redis-benchmark -c 50 -P 1 of the acquire script on fresh random names, then of the
        release script on held locks (preloaded), each on its own; a pair costs the sum."""
        self.flush()
        shas = self.load_scripts()
        n_acq, n_rel, preload = self.size["c50_acq_n"], self.size["c50_rel_n"], self.size["c50_preload"]
        # redis-benchmark draws every __rand_int__ of a request on its own, and cannot name the
        # counter of each random name's slot: one slot's counter serves them all here.
        keys = lock_keys("bench:floor:lock:__rand_int__")
        keys[4] = slot_fencing_counter_of("bench:floor:lock")
        acq = self.redis_benchmark([
            "-c", "50", "-P", "1", "-n", str(n_acq), "-r", "1000000000",
            "EVALSHA", shas["mutex_acquire"], str(len(keys))] + keys +
            [LEASE_MS, OWNER, "0", TICKET, VALID_MS, CLIENT_ID, "0"])
        acq_rps = list(acq.values())[0]["rps"]
        self.flush()
        self.r.eval("for i = 0, tonumber(ARGV[1]) - 1 do "
                    "redis.call('hset', string.format('bench:floor:held:%012d', i), ARGV[2], '1') end "
                    "return 1", 0, preload, OWNER)
        before = self.commandstats()
        keys = lock_keys("bench:floor:held:__rand_int__")
        keys[4] = slot_fencing_counter_of("bench:floor:held")
        rel = self.redis_benchmark([
            "-c", "50", "-P", "1", "-n", str(n_rel), "-r", str(preload),
            "EVALSHA", shas["mutex_release"], str(len(keys))] + keys +
            ["redisson_lock__channel:{bench:floor:held:__rand_int__}",
             "dlock_lock__channel:{bench:floor:held:__rand_int__}", OWNER, "1", LEASE_MS, "",
             YIELD_MS])
        after = self.commandstats()
        rel_rps = list(rel.values())[0]["rps"]
        full = (after.get("del", {}).get("calls", 0) - before.get("del", {}).get("calls", 0)) / n_rel
        self.flush()
        self.res.put("floor", "c50", "acquire_rps", acq_rps)
        self.res.put("floor", "c50", "release_rps", rel_rps)
        self.res.put("floor", "c50", "pairs_per_s", 1.0 / (1.0 / acq_rps + 1.0 / rel_rps))
        self.cur["c50_pairs"] = 1.0 / (1.0 / acq_rps + 1.0 / rel_rps)
        self.res.put("floor", "c50", "release_full_path", full)

    # ---- W1 -----------------------------------------------------------------------------------

    def sample_file(self, system, rep, chunk):
        path = os.path.join(self.a.work, "samples", "w1-%s-r%d-c%d.txt" % (system.replace(":", "-"), rep, chunk))
        self.rep_samples.setdefault(system, []).append(path)
        self.samples.setdefault(("w1", system), []).append(path)
        return path

    def w1(self, system, rep, chunk):
        """One chunk of W1 for one system; the chunks of all systems alternate. A system named
        cluster:X is X on the cluster, its pairs cycling over one name per master."""
        if system == "ping":
            return self.floor_ping(rep, chunk)
        if system in semaphores.W1:
            return self.semaphores.w1(system, rep, chunk)
        n = str(max(100, self.size["w1_n"] // self.size["w1_chunks"]))
        warm = str(self.size["w1_warmup"])
        port = str(self.a.port)
        on, server, url, names = "", ["--port", port], self.url, []
        if system.startswith(CLUSTER):
            on, system = CLUSTER, system[len(CLUSTER):]
            server, url, names = self.cluster.peer_args(), self.cluster.url(), ["--names=" + self.cluster.names]
        if system == "floor-pair":
            self.run_json([self.bin("dlock_floor_pair"), "--port", port, "--iterations", n, "--warmup", warm,
                           "--samples", self.sample_file(system, rep, chunk)], 300)
        elif system == "dlock":
            sdir = os.path.join(self.a.work, "samples", "w1-%sdlock-r%d-c%d" % (on.replace(":", "-"), rep, chunk))
            os.makedirs(sdir, exist_ok=True)
            doc = json.loads(self.run_json([self.bin("dlock_bench_pair"), "--url=" + url,
                                            "--iterations=" + n, "--warmup=" + warm, "--samples-dir=" + sdir,
                                            "--benchmark_format=json"] + names, 300))
            found = set()
            for b in doc["benchmarks"]:
                name = "dlock-sync" if b["name"].startswith("w1/dlock_sync") else "dlock-async"
                if b.get("error_occurred"):
                    raise BenchError("%s: %s" % (b["name"], b.get("error_message")))
                found.add(name)
                path = os.path.join(sdir, name + ".txt")
                self.rep_samples.setdefault(on + name, []).append(path)
                self.samples.setdefault(("w1", on + name), []).append(path)
            if found != {"dlock-sync", "dlock-async"}:
                raise BenchError("dlock_bench_pair ran %s" % sorted(found))
        elif system == "redis-py":
            self.run_json([PY, os.path.join(HERE, "peers", "redis_py_peer.py"), "w1"] + server + names +
                          ["--iterations", n, "--warmup", warm, "--samples", self.sample_file(on + system, rep, chunk)],
                          300)
        elif system == "node-redlock":
            self.run_json(["node", os.path.join(HERE, "peers", "redlock_peer.js"), "w1"] + server + names +
                          ["--iterations", n, "--warmup", warm, "--samples", self.sample_file(on + system, rep, chunk)],
                          300, env=self.node_env)

    def w1_finish(self, rep):
        """The repetition's W1 numbers, from every chunk's samples pooled per system."""
        if not self.ping_chunks:
            raise BenchError("no PING measurement")
        inline = statistics.median(x[0] for x in self.ping_chunks)
        mbulk = statistics.median(x[1] for x in self.ping_chunks)
        self.res.put("floor", "ping", "inline_p50_us", inline)
        self.res.put("floor", "ping", "mbulk_p50_us", mbulk)
        self.res.put("floor", "ping", "rtt_us", mbulk)
        self.cur["rtt_us"] = mbulk
        stats = {}
        for system, paths in self.rep_samples.items():
            if system.startswith(CLUSTER):
                continue  # the cluster's (cluster_bench.py)
            v = read_samples(paths)
            if v:
                stats[system] = (pct(v, 0.5), pct(v, 0.99), statistics.mean(v))
        if "floor-pair" not in stats:
            raise BenchError("no floor-pair samples")
        f50, f99, _ = stats["floor-pair"]
        self.cur["pair_p50"] = f50
        for system, (p50, p99, avg) in stats.items():
            self.res.put("w1", system, "p50_us", p50)
            self.res.put("w1", system, "p99_us", p99)
            self.res.put("w1", system, "mean_us", avg)
            self.res.put("w1", system, "p50_vs_floor", p50 / f50)
            self.res.put("w1", system, "p99_vs_floor", p99 / f99)
            self.res.put("w1", system, "p50_rtt", p50 / mbulk)
        peers = [stats[s][0] for s in self.peers() if s in stats]
        if peers and "dlock-sync" in stats:
            self.res.put("w1", "dlock-sync", "p50_vs_best_peer", stats["dlock-sync"][0] / min(peers))

    # ---- W2 -----------------------------------------------------------------------------------

    def w2_cmd(self, system, seconds, start_at, prefix):
        common = ["--seconds", str(seconds), "--start-at", str(start_at), "--prefix", prefix]
        server, url = ["--port", str(self.a.port)], self.url
        if system.startswith(CLUSTER):
            system, server, url = system[len(CLUSTER):], self.cluster.peer_args(), self.cluster.url()
        if system in ("dlock-async", "dlock-threads"):
            return [self.bin("dlock_load"), "w2", "--url", url, "--lockers", "50", "--mode",
                    system.split("-")[1]] + common
        if system == "redis-py":
            return [PY, os.path.join(HERE, "peers", "redis_py_peer.py"), "w2"] + server + ["--lockers", "50"] + common
        return ["node", os.path.join(HERE, "peers", "redlock_peer.js"), "w2"] + server + ["--lockers", "50"] + common

    def w2(self, system, procs, rep, chunk):
        """One chunk of W2 for one system: w2_s / w2_chunks seconds; the repetition's pairs/s is
        the chunks' pairs over their seconds (w2_finish)."""
        if system in family.W2:
            return self.family.w2(system, rep, chunk)
        if system in semaphores.W2:
            return self.semaphores.w2(system, rep, chunk)
        seconds = self.size["w2_s"] / self.size["w2_chunks"]
        prefixes = ["bench:w2:%s:r%d:c%d:p%d" % (system.replace(":", "-"), rep, chunk, i) for i in range(procs)]
        if system.startswith(CLUSTER):  # each master serves a third of every process's names
            prefixes = [self.cluster.spread(p, 50) for p in prefixes]
        at = self.start_at()
        cmds = [self.w2_cmd(system, seconds, at, p) for p in prefixes]
        servers = self.cluster.server_cpu_s(system)
        outs = self.run_group(cmds, seconds + 60, env=self.node_env if system.endswith("node-redlock") else None)
        self.cluster.add_cpu(system, procs, servers, outs)
        acc = self.cur.setdefault("w2", {}).setdefault((system, procs), [0, 0.0, 0])
        acc[0] += sum(o["pairs"] for o in outs)
        acc[1] += max(o["seconds"] for o in outs)
        acc[2] += sum(o["errors"] for o in outs)

    def w2_finish(self, procs, rep):
        """The repetition's W2 numbers for `procs` processes, from its chunks; dlock's ratio to the
        best peer is taken within the repetition, as every other ratio."""
        key = "%dx50" % procs
        rates = {}
        for (system, p), (pairs, secs, errors) in self.cur.get("w2", {}).items():
            if p != procs or secs <= 0 or system.startswith(CLUSTER):
                continue
            rates[system] = pairs / secs
            self.res.put("w2", system, key + "_pairs_per_s", pairs / secs)
            self.res.put("w2", system, key + "_errors", errors)
            if "c50_pairs" in self.cur:
                self.res.put("w2", system, key + "_vs_floor", pairs / secs / self.cur["c50_pairs"])
        peers = {s: r for s, r in rates.items() if s in self.peers()}
        if peers:
            best = max(peers, key=peers.get)
            self.w2_best_peers.setdefault(procs, []).append(best)
            for s in ("dlock-async", "dlock-threads"):
                if s in rates and peers[best] > 0:
                    self.res.put("w2", s, key + "_vs_best_peer", rates[s] / peers[best])

    # ---- W3 -----------------------------------------------------------------------------------

    def w3(self, system, rep):
        seconds = self.size["w3_s"]
        at = self.start_at()
        name = "bench:w3:%s:r%d" % (system, rep)
        cmds = []
        for i in range(8):
            common = ["--name", name, "--hold-us", "1000", "--think-us", "1000", "--seconds", str(seconds),
                      "--start-at", str(at), "--id", str(i)]
            if system in ("dlock", family.W3):
                cmds.append([self.bin("dlock_load"), "w3", "--url", self.url, "--kind",
                             "fair" if system == family.W3 else "mutex"] + common)
            elif system == "floor-w3":
                cmds.append([self.bin("dlock_floor_w3"), "--host", "127.0.0.1", "--port", str(self.a.port)] + common)
            elif system == "redis-py":
                cmds.append([PY, os.path.join(HERE, "peers", "redis_py_peer.py"), "w3", "--port",
                             str(self.a.port), "--poll", "0.001"] + common)
            else:
                cmds.append(["node", os.path.join(HERE, "peers", "redlock_peer.js"), "w3", "--port",
                             str(self.a.port), "--poll-ms", "1"] + common)
        before = self.commandstats()
        outs = self.run_group(cmds, seconds + 60, env=self.node_env if system == "node-redlock" else None)
        sent = commands_sent(before, self.commandstats(), system)
        start = min(int(o["start"]) for o in outs)
        deadline = max(int(o["deadline"]) for o in outs)
        events, counts = [], []
        for o in outs:
            ev = [[int(x) for x in e] for e in o["events"] if int(e[1]) <= deadline]
            counts.append(len(ev))
            events.extend(ev)
        events.sort(key=lambda e: e[1])  # by acquisition time
        waits = [(e[1] - e[0]) / 1e3 for e in events]
        handoffs, overlaps = [], 0
        for prev, cur in zip(events, events[1:]):
            if cur[1] < prev[2]:
                overlaps += 1  # acquired before the previous holder called unlock: never allowed
            if cur[0] < prev[3]:  # it was waiting when the unlock returned: a hand-off
                handoffs.append((cur[1] - prev[3]) / 1e3)
        seconds_run = (deadline - start) / 1e9
        holds = [(e[2] - e[1]) / 1e3 for e in events]
        rtt = self.cur.get("rtt_us", float("nan"))
        rate = len(events) / seconds_run
        ideal = 1e6 / (1000.0 + 2 * rtt)  # 1 / (hold + 2 RTT), per second
        put = lambda k, v: self.res.put("w3", system, k, v)
        put("acq_per_s", rate)
        put("acq_vs_ideal", rate / ideal)
        cold = self.cur.get("rtt_after_hold_us", float("nan"))  # floor_idle_ping
        put("acq_vs_ideal_rtt_after_hold", rate / (1e6 / (1000.0 + 2 * cold)))
        put("acq_vs_ideal_measured_hold", rate / (1e6 / (statistics.mean(holds) + 2 * rtt)) if holds else float("nan"))
        put("wait_p50_us", pct(waits, 0.5))
        put("wait_p99_us", pct(waits, 0.99))
        put("handoff_p50_us", pct(handoffs, 0.5))
        put("handoff_p99_us", pct(handoffs, 0.99))
        put("handoff_p50_rtt", pct(handoffs, 0.5) / rtt)
        put("handoff_p99_rtt", pct(handoffs, 0.99) / rtt)
        put("jain", jain(counts))
        put("hold_mean_us", statistics.mean(holds) if holds else float("nan"))
        put("overlaps", overlaps)
        put("errors", sum(int(o["errors"]) for o in outs))
        put("acquisitions", len(events))
        put("commands_per_acq", sum(sent.values()) / len(events) if events else float("nan"))
        self.w3_raw[system] = {"wait": waits, "handoff": handoffs}
        self.cur.setdefault("w3_acq_per_s", {})[system] = rate

    def w3_finish(self, rep):
        """dlock's W3 rate over the floor's, both of this repetition."""
        got = self.cur.get("w3_acq_per_s", {})
        if "dlock" not in got or "floor-w3" not in got:
            raise BenchError("W3 needs both dlock and its floor in the repetition")
        self.res.put("w3", "dlock", "acq_vs_floor", got["dlock"] / got["floor-w3"])

    # ---- W4 -----------------------------------------------------------------------------------

    def w4(self, rep):
        seconds = self.size["w4_s"]
        at = self.start_at()
        name = "bench:w4:r%d" % rep
        # The steady state: a window that leaves out the waiters' arrival (first attempt,
        # SUBSCRIBE, the check after it) and departure (the leave at the end).
        margin = int(self.size["w4_margin"] * 1e9)
        window = (at + margin, at + int(seconds * 1e9) - margin)
        cmds = [[self.bin("dlock_load"), "w4", "--url", self.url, "--name", name, "--waiters", "10",
                 "--hold-us", "1000", "--seconds", str(seconds), "--start-at", str(at),
                 "--count-from", str(window[0]), "--count-to", str(window[1])] for _ in range(20)]
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
        try:
            def sleep_until(t):
                while mono_ns() < t:
                    time.sleep(min(0.05, max(0.0, (t - mono_ns()) / 1e9)))
            sleep_until(at)
            before, err_before = self.commandstats(), self.errorstats()
            sleep_until(window[0])
            steady_from = self.commandstats()
            sleep_until(window[1])
            steady_to = self.commandstats()
            outs, failed = [], None
            for p in procs:
                out, err = p.communicate(timeout=seconds + 60)
                if p.returncode != 0:
                    failed = failed or "dlock_load w4 exited %d: %s" % (p.returncode, err[-1500:])
                else:
                    outs.append(json.loads(out.strip().splitlines()[-1]))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if failed:
            raise BenchError(failed)
        after, err_after = self.commandstats(), self.errorstats()
        delta = commands_sent(before, after, "dlock")
        inside = sum(v["calls"] - before.get(c, {}).get("calls", 0) for c, v in after.items()
                     if c in SCRIPT_INTERNAL["dlock"])
        acquisitions = sum(o["acquisitions"] for o in outs)
        sent = sum(delta.values())
        sub_fail = 0
        for cmd in ("subscribe", "unsubscribe"):
            for k in ("failed_calls", "rejected_calls"):
                sub_fail += after.get(cmd, {}).get(k, 0) - before.get(cmd, {}).get(k, 0)
        errors_delta = sum(err_after.values()) - sum(err_before.values())
        put = lambda k, v: self.res.put("w4", "dlock", k, v)
        put("handoffs", acquisitions)
        put("handoffs_per_s", acquisitions / seconds)
        put("commands_per_handoff", sent / acquisitions if acquisitions else float("nan"))
        put("script_commands_per_handoff", inside / acquisitions if acquisitions else float("nan"))
        for cmd in ("evalsha", "subscribe", "unsubscribe", "ping"):
            put(cmd + "_per_handoff", delta.get(cmd, 0) / acquisitions if acquisitions else float("nan"))
        # Steady state: the acquisitions the processes counted within the same window (the
        # scripts run per hand-off vary: a release that finds the head of the queue gone tries
        # the next, a woken waiter may attempt more than once; so hand-offs are counted apart).
        steady_handoffs = sum(o.get("window_acquisitions", 0) for o in outs)
        steady = commands_sent(steady_from, steady_to, "dlock")
        put("steady_handoffs", steady_handoffs)
        put("steady_commands_per_handoff", sum(steady.values()) / steady_handoffs if steady_handoffs else float("nan"))
        put("steady_evalsha_per_handoff", steady.get("evalsha", 0) / steady_handoffs if steady_handoffs else float("nan"))
        put("subscribe_errors", sub_fail + sum(o["refused_subscriptions"] for o in outs))
        put("error_replies", errors_delta)
        put("client_errors", sum(o["errors"] for o in outs))
        put("timeouts", sum(o["timeouts"] for o in outs))

    # ---- W5, W6 -------------------------------------------------------------------------------

    def w5(self, rep):
        out = json.loads(self.run_json([self.bin("dlock_load"), "w5", "--url",
                                        self.url + "?watchdog=" + self.size["w5_watchdog"], "--locks",
                                        str(self.size["w5_locks"]), "--periods", "3",
                                        "--prefix", "bench:w5:r%d" % rep], 300))
        for k in ("lost", "acquire_failed", "release_failed", "renewal_scripts", "holds_renewed",
                  "renewals_per_hold", "scripts_per_100_holds_per_period", "scripts_per_100_renewals",
                  "rss_per_lock", "acquire_s", "locks", "watchdog_ms"):
            self.res.put("w5", "dlock", k, out[k])
        if self.cluster.up():  # reported: one script per slot, so it cannot meet W5's target there
            out = json.loads(self.run_json([self.bin("dlock_load"), "w5", "--url",
                                            self.cluster.url() + "?watchdog=" + self.size["w5_watchdog"],
                                            "--locks", str(self.size["w5_locks"]), "--periods", "3",
                                            "--prefix", "bench:w5c:r%d" % rep], 300))
            for k in ("lost", "scripts_per_100_holds_per_period"):
                self.res.put("cluster-w5", "dlock", k, out[k])

    def w6(self, rep):
        # dlock as configured by default (fencing tokens from the counter of each lock's cluster
        # slot), then with fencing off.
        sep = "&" if "?" in self.url else "?"
        for system, url in (("dlock", self.url), ("dlock-nofence", self.url + sep + "fencing=off")):
            self.flush()
            out = json.loads(self.run_json([self.bin("dlock_load"), "w6", "--url", url, "--locks",
                                            str(self.size["w6_locks"]), "--prefix", "bench:w6:r%d" % rep], 300))
            self.flush()
            for k in ("bytes_per_lock", "bytes_left_per_released_lock", "keys_per_lock",
                      "keys_left_per_released_lock", "acquire_failed", "release_failed", "locks", "clients",
                      "acquire_s", "release_s"):
                self.res.put("w6", system, k, out[k])

    # ---- diagnosis ----------------------------------------------------------------------------

    def diag(self):
        """perf stat and strace -c of the W1 programs, when the tools are installed: context
        switches, CPU time and system calls per lock+unlock pair (for the findings)."""
        n = self.size["diag_n"]
        progs = {
            "floor-pair": [self.bin("dlock_floor_pair"), "--port", str(self.a.port), "--iterations", str(n),
                           "--warmup", "0"],
            "dlock-sync": [self.bin("dlock_bench_pair"), "--url=" + self.url, "--iterations=%d" % n,
                           "--warmup=0", "--benchmark_filter=dlock_sync"],
            "dlock-async": [self.bin("dlock_bench_pair"), "--url=" + self.url, "--iterations=%d" % n,
                            "--warmup=0", "--benchmark_filter=dlock_async"],
        }
        out = os.path.join(self.a.work, "diag.txt")
        if shutil.which("perf"):
            for name, cmd in progs.items():
                p = subprocess.run(["perf", "stat", "-x,", "-e", "context-switches,task-clock", "-o", out] + cmd,
                                   capture_output=True, text=True, timeout=120)
                if p.returncode != 0:
                    raise BenchError("perf stat: " + p.stderr[-500:])
                with open(out) as f:
                    for line in f:
                        cells = line.strip().split(",")
                        if len(cells) > 2 and cells[2] == "context-switches" and cells[0].replace(".", "").isdigit():
                            self.res.put("diag", name, "cs_per_pair", float(cells[0]) / n)
                        if len(cells) > 2 and cells[2] == "task-clock" and cells[0].replace(".", "").isdigit():
                            self.res.put("diag", name, "cpu_us_per_pair", float(cells[0]) * 1000 / n)
            # W2 in one process: CPU and context switches per pair, async chains against threads.
            for mode in ("async", "threads"):
                cmd = [self.bin("dlock_load"), "w2", "--url", self.url, "--lockers", "50", "--mode", mode,
                       "--seconds", str(self.size["w2_s"] / 2), "--prefix", "bench:diag:" + mode]
                p = subprocess.run(["perf", "stat", "-x,", "-e", "context-switches,task-clock", "-o", out] + cmd,
                                   capture_output=True, text=True, timeout=120)
                if p.returncode != 0:
                    raise BenchError("perf stat: " + p.stderr[-500:])
                pairs = json.loads(p.stdout.strip().splitlines()[-1])["pairs"]
                with open(out) as f:
                    for line in f:
                        cells = line.strip().split(",")
                        if len(cells) > 2 and cells[2] == "context-switches" and cells[0].replace(".", "").isdigit():
                            self.res.put("diag", "w2-" + mode, "cs_per_pair", float(cells[0]) / pairs)
                        if len(cells) > 2 and cells[2] == "task-clock" and cells[0].replace(".", "").isdigit():
                            self.res.put("diag", "w2-" + mode, "cpu_us_per_pair", float(cells[0]) * 1000 / pairs)
        # One client holding many locks: time to take and release N of them, for growing N.
        for n_locks in self.size["diag_scaling"]:
            self.flush()
            j = json.loads(self.run_json([self.bin("dlock_load"), "w6", "--url", self.url, "--locks", str(n_locks),
                                          "--clients", "1", "--prefix", "bench:diag:scaling"], 300))
            self.res.put("diag", "scaling-%d" % n_locks, "acquire_s", j["acquire_s"])
            self.res.put("diag", "scaling-%d" % n_locks, "release_s", j["release_s"])
        self.flush()
        if shutil.which("strace"):
            for name, cmd in progs.items():
                p = subprocess.run(["strace", "-f", "-c", "-o", out] + cmd, capture_output=True, text=True,
                                   timeout=300)
                if p.returncode != 0:
                    raise BenchError("strace: " + p.stderr[-500:])
                total = 0
                with open(out) as f:
                    for line in f:
                        cells = line.split()
                        if len(cells) >= 5 and cells[0][0].isdigit() and cells[-1] not in ("total",):
                            calls = int(cells[3])
                            total += calls
                            self.res.put("diag", name, "sys_" + cells[-1], calls / n)
                self.res.put("diag", name, "syscalls_per_pair", total / n)

    # ---- the sitting --------------------------------------------------------------------------

    def step(self, what, fn, *args):
        t0 = time.monotonic()
        try:
            fn(*args)
            log("  %-28s %5.1fs" % (what, time.monotonic() - t0))
        except Exception as e:  # keep going: the report and the check say what failed
            msg = "%s: %s" % (what, e)
            self.res.errors.append(msg)
            loud("FAILED " + msg)

    def run(self):
        reps = self.size["reps"]
        self.step("cluster: start 3 masters + 3 replicas", self.cluster.start)
        self.step("red_lock: start %d redis-servers" % redlock.SERVERS, self.redlock.start)
        w1_systems = ["ping", "floor-pair", "dlock"] + self.peers() + self.cluster.w1_systems() + \
            self.semaphores.w1_systems()
        w2_systems = ["dlock-async", "dlock-threads"] + self.peers() + self.cluster.w2_systems()
        w3_systems = ["floor-w3", "dlock"] + self.peers()
        self.load_avg = os.getloadavg()
        self.load_avgs = []
        for rep in range(reps):
            log("repetition %d of %d" % (rep + 1, reps))
            self.cur, self.ping_chunks, self.rep_samples = {}, [], {}
            self.load_avgs.append(os.getloadavg())
            rot = lambda xs, k=0: (xs[(rep + k) % len(xs):] + xs[:(rep + k) % len(xs)]) if xs else xs
            # W1 and the PING floor in chunks, the systems alternating chunk by chunk, so that a
            # change of the machine's state during the repetition hits all of them alike.
            for chunk in range(self.size["w1_chunks"]):
                for s in rot(w1_systems, chunk):
                    self.step("W1 %s (chunk %d)" % (s, chunk + 1), self.w1, s, rep, chunk)
            self.step("W1 statistics", self.w1_finish, rep)
            if self.cluster.up():
                self.step("W1 cluster statistics", self.cluster.w1_finish, rep)
            self.step("floor: -c 50 -P 1 scripts", self.floor_c50, rep)
            # W2 in chunks too, the systems' order turning chunk by chunk (as W1's).
            for procs in (1, 4):
                for chunk in range(self.size["w2_chunks"]):
                    extra = self.family.w2_systems(procs) + self.semaphores.w2_systems(procs)
                    for s in rot(w2_systems + extra, chunk):
                        self.step("W2 %dx50 %s (chunk %d)" % (procs, s, chunk + 1),
                                  self.w2, s, procs, rep, chunk)
                self.step("W2 %dx50 statistics" % procs, self.w2_finish, procs, rep)
                if self.cluster.up():
                    self.step("W2 %dx50 cluster statistics" % procs, self.cluster.w2_finish, procs, rep)
            self.step("permits statistics", self.semaphores.finish, rep)
            self.step("dlock exec --permits overhead", self.semaphores.exec_overhead, rep)
            self.redlock.rep(rep)  # its own servers; a step per measurement
            self.step("floor: PING after a 1 ms hold", self.floor_idle_ping, rep)
            # dlock and its floor back to back (their ratio is taken per repetition), in turn first.
            for s in rot(w3_systems[:2]) + self.family.w3_systems() + rot(w3_systems[2:]):
                self.step("W3 " + s, self.w3, s, rep)
            self.step("W3 statistics", self.w3_finish, rep)
            self.step("fair_mutex, shared_mutex statistics", self.family.finish, rep)
            self.step("W4 dlock", self.w4, rep)
            self.step("W5 dlock", self.w5, rep)
            self.step("W6 dlock", self.w6, rep)
            self.step("W6 fair_mutex, shared_mutex", self.family.w6, rep)
        self.load_avgs.append(os.getloadavg())
        self.step("diagnosis (perf stat, strace -c, scaling)", self.diag)


# ---- the report ----------------------------------------------------------------------------------

def fmt(x, digits=2):
    if not finite(x):
        return "—"
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    if digits == 0 or abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return ("%." + str(digits) + "f") % x


def cell(res, w, s, m, digits=2, unit=""):
    med = res.med(w, s, m)
    lo, hi = res.spread(w, s, m)
    if not finite(med):
        return "—"
    if len([x for x in res.get(w, s, m) if finite(x)]) < 2 or lo == hi:
        return fmt(med, digits) + unit
    return "%s%s (%s–%s)" % (fmt(med, digits), unit, fmt(lo, digits), fmt(hi, digits))


# Timer slack of the bench and every process it starts (they inherit it): W3's think time is a
# sleep of 1 ms, which Linux's default slack (50 us) stretched for every system alike; its hold
# is a sleep that ends 150 us early and a read of the clock until the 1 ms is up
# (bench/common.hpp's hold_until_ns, and the same in both peers), since even with 1 us of slack
# a sleep's wake-up took ~50 us more here. The mean hold is reported per system either way. It
# changes no library's code path, only how closely the harness keeps its own times.
TIMER_SLACK_NS = 1000


def set_timer_slack(ns):
    """PR_SET_TIMERSLACK (29) for this process; True if the kernel took it."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(29, ns, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def machine():
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        models = [l.split(":", 1)[1].strip() for l in lines if l.startswith("model name")]
        info["cpu"] = "%s × %d" % (models[0], len(models)) if models else platform.processor()
        mhz = [l.split(":", 1)[1].strip() for l in lines if l.startswith("cpu MHz")]
        if mhz:
            info["mhz"] = mhz[0]
        flags = [l for l in lines if l.startswith("flags")]
        info["hypervisor"] = "yes" if flags and " hypervisor" in flags[0] else "no"
    except OSError:
        info["cpu"] = platform.processor()
    info["nproc"] = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(l for l in f if l.startswith("MemTotal")).split()[1])
        info["memory"] = "%.1f GiB" % (kb / 1024 / 1024)
    except (OSError, StopIteration):
        info["memory"] = "?"
    info["kernel"] = platform.release()
    try:
        with open("/etc/os-release") as f:
            info["os"] = next(l.split("=", 1)[1].strip().strip('"') for l in f if l.startswith("PRETTY_NAME"))
    except (OSError, StopIteration):
        info["os"] = platform.platform()
    return info


def versions(runner):
    v = {}
    srv = runner.r.info("server")
    v["redis"] = "%s (%s, %s)" % (srv.get("redis_version"), runner.r.info("memory").get("mem_allocator", "?"),
                                 "io-threads " + str(runner.r.config_get("io-threads").get("io-threads", "1")))
    v["g++"] = subprocess.run(["g++", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    v["python3"] = platform.python_version()
    v["redis-py"] = redis.__version__
    if runner.node_env is not None:
        v["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
        for pkg in ("redlock", "ioredis"):
            try:
                with open(os.path.join(runner.a.node_modules, pkg, "package.json")) as f:
                    v[pkg] = json.load(f)["version"]
            except (OSError, ValueError, KeyError):
                v[pkg] = "?"
    return v


def verdict(value, ok):
    if not finite(value):
        return "—"
    return "**met**" if ok(value) else "**missed**"


def write_report(runner, md_path, plot_dir, plot_rel, findings_path, elapsed):
    res, a = runner.res, runner.a
    size = runner.size
    m, v = machine(), versions(runner)
    L = []
    add = L.append
    add("# dlock benchmarks")
    add("")
    add("Generated by `scripts/bench` on %s in %.0f s (%d repetition%s, every system of a workload "
        "interleaved; each cell is the median over repetitions with the min–max spread in parentheses). "
        "Ratios are taken within a repetition: the same server, the same minute. Do not edit by hand: "
        "re-run `scripts/bench`." % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), elapsed, size["reps"],
                                     "" if size["reps"] == 1 else "s"))
    add("")
    if res.errors:
        add("**Some steps failed in this run:**")
        add("")
        for e in res.errors:
            add("- `%s`" % e.replace("`", "'")[:300])
        add("")
    skipped = []
    if a.skip_redis_py:
        skipped.append("redis-py (%s)" % a.skip_redis_py)
    if runner.node_env is None:
        skipped.append("node-redlock (%s)" % (a.skip_node or "not installed"))
    if skipped:
        add("**Peers skipped: %s.**" % "; ".join(skipped))
        add("")

    rtt = res.med("floor", "ping", "rtt_us")
    add("## Machine")
    add("")
    add("| | |")
    add("|---|---|")
    add("| CPU | %s%s |" % (m.get("cpu"), (", %s MHz" % m["mhz"]) if "mhz" in m else ""))
    add("| virtual machine | %s |" % m.get("hypervisor", "?"))
    add("| nproc | %s |" % m.get("nproc"))
    add("| memory | %s |" % m.get("memory"))
    add("| OS, kernel | %s, %s |" % (m.get("os"), m.get("kernel")))
    for k, val in v.items():
        add("| %s | %s |" % (k, val))
    add("| timer slack of the bench's processes | %s |" % (
        "%d µs (Linux's default: 50 µs; see W3)" % (TIMER_SLACK_NS // 1000) if runner.timer_slack else "default (50 µs)"))
    add("| load average (1, 5, 15 min) at start | %s |" % " ".join("%.2f" % x for x in runner.load_avg))
    add("| 1-min load average at each repetition's start, and at the end | %s |" % " → ".join(
        "%.2f" % x[0] for x in runner.load_avgs))
    add("")
    add("Everything runs on this one host: `redis-server` (its own, on a loopback port, `--save '' "
        "--appendonly no`), the clients and the load processes share its %s CPUs, so multi-process "
        "workloads measure the client libraries' CPU and scheduling costs as much as Redis'." % m.get("nproc"))
    add("")

    # ---- summary
    ok_le = lambda t: (lambda x: x <= t)
    ok_ge = lambda t: (lambda x: x >= t)
    rows = []

    def row(workload, what, w, s, metric, target, ok, digits=2, unit=""):
        rows.append("| %s | %s | %s | %s | %s |" % (workload, what, cell(res, w, s, metric, digits, unit), target,
                                                    verdict(res.med(w, s, metric), ok)))

    row("W1", "dlock sync (`mutex::lock`/`unlock`) p50 ÷ floor pair p50", "w1", "dlock-sync", "p50_vs_floor",
        "≤ 1.30", ok_le(1.30), digits=3, unit="×")
    if res.get("w1", "dlock-sync", "p50_vs_best_peer"):
        row("W1", "dlock sync p50 ÷ the best peer's p50, same repetition", "w1", "dlock-sync",
            "p50_vs_best_peer", "< 1", lambda x: x < 1.0, digits=3, unit="×")
    row("W1", "dlock async (`async_lock`/`async_unlock`) p50 ÷ floor pair p50", "w1", "dlock-async",
        "p50_vs_floor", "≤ 1.10", ok_le(1.10), digits=3, unit="×")
    for procs in (1, 4):
        for s, label in (("dlock-async", "async"), ("dlock-threads", "50 threads")):
            row("W2", "%d×50, dlock %s, pairs/s ÷ `-c 50 -P 1` floor" % (procs, label), "w2", s,
                "%dx50_vs_floor" % procs, "≥ 1.5", ok_ge(1.5), digits=3, unit="×")
        bests = runner.w2_best_peers.get(procs, [])
        if bests:
            named = ", ".join(sorted(set(bests), key=bests.index))
            for s, label in (("dlock-async", "async"), ("dlock-threads", "50 threads")):
                row("W2", "%d×50, dlock %s ÷ the best peer of the same repetition (%s)" % (procs, label, named),
                    "w2", s, "%dx50_vs_best_peer" % procs, "> 1", lambda x: x > 1.0, digits=3, unit="×")
    row("W3", "dlock's acquisitions/s ÷ its protocol floor's (`dlock_floor_w3`), per repetition", "w3", "dlock",
        "acq_vs_floor", "≥ 0.97", ok_ge(0.97), digits=3, unit="×")
    rows.append("| W3 | acquisitions/s ÷ 1/(hold + 2 RTT): dlock; the floor | %s; %s | reported | — |" % (
                cell(res, "w3", "dlock", "acq_vs_ideal", 3), cell(res, "w3", "floor-w3", "acq_vs_ideal", 3)))
    rows.append("| W3 | acquisitions/s ÷ 1/(hold + 2 RTT after a 1 ms hold): dlock; the floor | %s; %s | reported | — |" % (
                cell(res, "w3", "dlock", "acq_vs_ideal_rtt_after_hold", 3),
                cell(res, "w3", "floor-w3", "acq_vs_ideal_rtt_after_hold", 3)))
    rows.append("| W3 | hand-off p50 in RTTs | %s | reported | — |" % cell(res, "w3", "dlock", "handoff_p50_rtt", 3))
    row("W3", "Jain fairness of per-process acquisitions", "w3", "dlock", "jain", "≥ 0.95", ok_ge(0.95), digits=3)
    row("W4", "commands sent per hand-off (200 waiters, 20 processes), steady state", "w4", "dlock",
        "steady_commands_per_handoff", "≤ 3", ok_le(3.0))
    rows.append("| W4 | same over the whole run, with the 200 waiters' arrivals and departures | %s | reported | — |" %
                cell(res, "w4", "dlock", "commands_per_handoff", 2))
    row("W4", "subscribe errors", "w4", "dlock", "subscribe_errors", "0", lambda x: x == 0, digits=0)
    row("W5", "leases lost (%s locks, watchdog %s, 3 periods)" % (fmt(res.med("w5", "dlock", "locks")), size["w5_watchdog"]),
        "w5", "dlock", "lost", "0", lambda x: x == 0, digits=0)
    row("W5", "renewal scripts per 100 holds per period", "w5", "dlock", "scripts_per_100_holds_per_period", "≤ 1",
        ok_le(1.0), digits=3)
    rows.append("| W5 | client memory per held lock (RSS delta ÷ locks) | %s | reported | — |" %
                cell(res, "w5", "dlock", "rss_per_lock", 0, " B"))
    row("W6", "Redis memory per held lock (`used_memory` delta ÷ %s locks), default config (fencing on: one counter per cluster slot)" % fmt(res.med("w6", "dlock", "locks")),
        "w6", "dlock", "bytes_per_lock", "≤ 200 B", ok_le(200.0), digits=0, unit=" B")
    row("W6", "same with `fencing=off` (no fencing counter)",
        "w6", "dlock-nofence", "bytes_per_lock", "≤ 200 B", ok_le(200.0), digits=0, unit=" B")
    runner.family.target_rows(row, rows.append)
    runner.semaphores.target_rows(row, rows.append)
    runner.redlock.target_rows(row, rows.append)
    runner.cluster.target_rows(row)
    add("## Targets")
    add("")
    add("| | measure | dlock | target | |")
    add("|---|---|---|---|---|")
    L.extend(rows)
    add("")
    add("Floor of this run: one round trip (`redis-benchmark -c 1` PING p50) **%s µs**; the acquire+release "
        "pair over hiredis **%s µs** p50; `-c 50 -P 1` of the two scripts **%s pairs/s**." % (
            cell(res, "floor", "ping", "rtt_us", 0), cell(res, "w1", "floor-pair", "p50_us", 0),
            cell(res, "floor", "c50", "pairs_per_s", 0)))
    add("")

    # ---- floor
    add("## The floor")
    add("")
    add("| measure | value |")
    add("|---|---|")
    add("| `redis-benchmark -c 1 -t ping` (%d PINGs in %d chunks between W1's): PING_INLINE p50 | %s µs |" % (
        size["ping_n"], size["w1_chunks"], cell(res, "floor", "ping", "inline_p50_us", 0)))
    add("| same: PING_MBULK p50 (**RTT** below; the median of the chunks' p50s) | %s µs |" % cell(res, "floor", "ping", "mbulk_p50_us", 0))
    add("| `bench/floor_pair.cpp` (hiredis sync, dlock's two scripts, %d pairs): p50 | %s µs = %s RTT |" % (
        size["w1_n"], cell(res, "w1", "floor-pair", "p50_us", 0),
        fmt(res.med("w1", "floor-pair", "p50_us") / rtt) if finite(rtt) else "—"))
    add("| same: p99 | %s µs |" % cell(res, "w1", "floor-pair", "p99_us", 0))
    add("| `bench/floor_ping.cpp` (hiredis sync, %d pairs of PINGs before W3): a PING sent after a 1 ms hold "
        "(the server idle, as before W3's unlock), p50 | %s µs |" % (
            size["idle_ping_n"], cell(res, "floor", "idle-ping", "after_hold_p50_us", 0)))
    add("| same: p99 | %s µs |" % cell(res, "floor", "idle-ping", "after_hold_p99_us", 0))
    add("| same: the PING sent at once after it, p50 | %s µs |" % cell(res, "floor", "idle-ping", "back_to_back_p50_us", 0))
    add("| `redis-benchmark -c 50 -P 1` EVALSHA mutex_acquire (fresh names) | %s req/s |" % cell(res, "floor", "c50", "acquire_rps", 0))
    add("| `redis-benchmark -c 50 -P 1` EVALSHA mutex_release (held locks) | %s req/s |" % cell(res, "floor", "c50", "release_rps", 0))
    add("| **pairs/s floor** = 1 / (1/acquire + 1/release) | %s |" % cell(res, "floor", "c50", "pairs_per_s", 0))
    add("")
    add("How the `-c 50 -P 1` floor is measured: the scripts are loaded with `SCRIPT LOAD` (the SHA is "
        "checked against the file's). Acquire: %s requests on `bench:floor:lock:__rand_int__` with `-r 10^9`, "
        "so practically every request takes a free lock by the full first-acquisition path (EXISTS of the "
        "lock and of its yield marker, MGET of the slot's fencing counter and of RFencedLock's counter of the "
        "name, HSET, PEXPIRE, TIME, SET of the counter, ZREM of its ticket from the absent waiter queue — the "
        "arguments `lock()` sends; one slot's counter stands for every random name's, which redis-benchmark "
        "cannot name). Release: %s locks `bench:floor:held:%%012d` are "
        "first created held (count 1, same owner) by one server-side loop, then %s releases run on "
        "`bench:floor:held:__rand_int__` with `-r %s`; a release that finds its lock held takes the full "
        "path (HGET, DEL, PUBSUB NUMSUB of Redisson's and dlock's channels, TIME, ZRANGE of the absent waiter "
        "queue, PUBLISH `0`) — %s of them did (measured from `cmdstat_del`), the rest hit a "
        "lock already released (one HGET). redis-benchmark cannot alternate two commands on one "
        "connection, so the pair rate combines the two rates (time per pair = the sum of both). The "
        "database is flushed around each." % (
            fmt(size["c50_acq_n"]), fmt(size["c50_preload"]), fmt(size["c50_rel_n"]), fmt(size["c50_preload"]),
            ("%.1f%%" % (100 * res.med("floor", "c50", "release_full_path"))) if finite(res.med("floor", "c50", "release_full_path")) else "—"))
    add("")

    # ---- W1
    add("## W1 — one client, lock+unlock loop (%s pairs)" % fmt(size["w1_n"]))
    add("")
    add("![W1 latency](%s/w1_latency.png)" % plot_rel)
    add("")
    add("| system | p50 ÷ floor | p99 ÷ floor | p50 in RTT | p50 | p99 | mean |")
    add("|---|---|---|---|---|---|---|")
    for s in ["floor-pair", "dlock-sync", "dlock-async"] + runner.peers():
        if not res.get("w1", s, "p50_us"):
            continue
        add("| %s | %s | %s | %s | %s µs | %s µs | %s µs |" % (
            s, cell(res, "w1", s, "p50_vs_floor", unit="×"), cell(res, "w1", s, "p99_vs_floor", unit="×"),
            cell(res, "w1", s, "p50_rtt"),
            cell(res, "w1", s, "p50_us", 0), cell(res, "w1", s, "p99_us", 0), cell(res, "w1", s, "mean_us", 0)))
    add("")
    add("Each repetition runs every system in %d chunks of %s pairs, the systems alternating chunk by chunk "
        "(the PING floor too); percentiles are over the pooled chunks of a repetition." % (
            size["w1_chunks"], fmt(size["w1_n"] // size["w1_chunks"])))
    add("")
    add("- floor-pair: `bench/floor_pair.cpp`, the same scripts over hiredis' synchronous API.")
    add("- dlock-sync: `dlock::mutex` `lock()` + `unlock()` (watchdog lease), `bench/pair_bench.cpp` on Google "
        "Benchmark. dlock-async: `mutex::async_lock` + `lease::async_unlock` chained by their completion "
        "handlers on the client's I/O thread (same file). Debian's libbenchmark calls itself a debug build; its "
        "loop costs far less than a microsecond per pair, and the pairs are timed by the program itself.")
    add("- redis-py: `Redis.lock(name, timeout=30)` `acquire()` + `release()` (SET NX PX, then an EVALSHA). "
        "node-redlock: `redlock@4` on one `ioredis` client (one server, so no quorum), `lock(name, 30000)` + "
        "`unlock()` (EVALSHA both).")
    add("")

    # ---- W2
    add("## W2 — 50 lockers on distinct names (%.1f s per system and repetition, in %d chunks)" % (
        size["w2_s"], size["w2_chunks"]))
    add("")
    add("![W2 throughput](%s/w2_throughput.png)" % plot_rel)
    add("")
    add("| system | 1×50 pairs/s ÷ floor | 4×50 pairs/s ÷ floor | 1×50 pairs/s | 4×50 pairs/s |")
    add("|---|---|---|---|---|")
    for s in ["dlock-async", "dlock-threads"] + runner.peers():
        if not res.get("w2", s, "1x50_pairs_per_s") and not res.get("w2", s, "4x50_pairs_per_s"):
            continue
        add("| %s | %s | %s | %s | %s |" % (s, cell(res, "w2", s, "1x50_vs_floor", unit="×"),
                                            cell(res, "w2", s, "4x50_vs_floor", unit="×"),
                                            cell(res, "w2", s, "1x50_pairs_per_s", 0),
                                            cell(res, "w2", s, "4x50_pairs_per_s", 0)))
    add("")
    add("Floor: `-c 50 -P 1` pairs/s (above). Each repetition runs every system in chunks of equal length, "
        "the systems' order turning chunk by chunk (as W1's), and takes a system's pairs over its chunks' "
        "seconds; the ratio to the best peer is taken within each repetition (the peer named in Targets). "
        "1×50: one process with 50 lockers, each a lock+unlock loop on "
        "its own name; 4×50: four such processes at once (a common start time), pairs summed. dlock-async: "
        "one client, 50 chains of `async_lock`/`async_unlock` (they share its one command connection, so "
        "requests that meet in time leave in one write). dlock-threads: one client, 50 threads on the "
        "blocking API. redis-py: 50 threads, one connection pool. node-redlock: 50 concurrent async "
        "loops on one ioredis connection.")
    add("")

    # ---- W3
    add("## W3 — 8 processes on one name: hold 1 ms, think 1 ms (%.0f s)" % size["w3_s"])
    add("")
    add("![W3 latency](%s/w3_latency.png)" % plot_rel)
    add("")
    add("| system | acq/s ÷ 1/(hold+2 RTT) | same with the measured hold | same with the RTT after a 1 ms hold | hand-off p50 | hand-off p99 | Jain | acquisitions/s | wait p50 | wait p99 | commands sent per acquisition | mean hold | overlaps |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in ["floor-w3", "dlock", family.W3] + runner.peers():
        if not res.get("w3", s, "acq_per_s"):
            continue
        add("| %s | %s | %s | %s | %s RTT = %s µs | %s RTT = %s µs | %s | %s | %s µs | %s µs | %s | %s µs | %s |" % (
            s, cell(res, "w3", s, "acq_vs_ideal"), cell(res, "w3", s, "acq_vs_ideal_measured_hold"),
            cell(res, "w3", s, "acq_vs_ideal_rtt_after_hold"),
            cell(res, "w3", s, "handoff_p50_rtt"),
            cell(res, "w3", s, "handoff_p50_us", 0), cell(res, "w3", s, "handoff_p99_rtt"),
            cell(res, "w3", s, "handoff_p99_us", 0), cell(res, "w3", s, "jain", 3),
            cell(res, "w3", s, "acq_per_s", 0), cell(res, "w3", s, "wait_p50_us", 0),
            cell(res, "w3", s, "wait_p99_us", 0), cell(res, "w3", s, "commands_per_acq", 1),
            cell(res, "w3", s, "hold_mean_us", 0),
            cell(res, "w3", s, "overlaps", 0)))
    add("")
    add("Each process loops: take the lock (timestamp *call*, *acquired*), hold 1 ms, unlock (*unlock call*, "
        "*unlock returned*), sleep 1 ms. Timestamps are CLOCK_MONOTONIC, shared by the processes. "
        "Wait = acquired − call. Hand-off = next acquired − previous unlock returned, over consecutive "
        "acquisitions whose taker was already waiting when the unlock returned (negative when the next "
        "taker's reply arrived before the releaser's). Jain = (Σn)² / (8·Σn²) of the per-process counts. "
        "Overlaps: acquisitions before the previous holder called unlock (mutual exclusion broken; must be 0). "
        "The ideal rate uses the nominal 1 ms hold; `mean hold` shows what the holds really took: every "
        "driver sleeps until 150 µs before the hold's end and reads the clock until it (a sleep's wake-up "
        "alone took ~50 µs here), and every process runs with a 1 µs timer slack (see Machine). "
        "The RTT after a 1 ms hold is `bench/floor_ping.cpp`'s PING p50 measured just before W3 (The floor): "
        "the round trip an unlock sent after W3's hold pays when the server has had nothing to do meanwhile. "
        "The peers poll: redis-py `acquire(sleep=0.001)`, redlock `retryDelay: 1, retryJitter: 0, "
        "retryCount: -1` (their defaults, 100 ms and 200 ± 100 ms with 10 retries, would be far slower "
        "here); dlock waits on the unlock channel. floor-w3 (`bench/floor_w3.cpp`) is W3's floor: "
        "dlock's own scripts and waiter protocol with the same keys and arguments (an attempt with a ticket "
        "queues the waiter; it subscribes its waiter channel, dlock's and Redisson's channels of the name in "
        "one SUBSCRIBE and checks again once that is confirmed; an unlock hands the lock to the queue's "
        "oldest waiter and names its ticket on its waiter channel, and the woken waiter's next attempt takes "
        "the hold — a hand-off costs the release plus the grantee's attempt; it unsubscribes once it holds "
        "the lock) over two plain hiredis connections, one thread that sends and then sleeps until its "
        "answer comes (a blocking read for a script's reply, `poll()` for a message) and parses it itself — "
        "no I/O thread, no watchdog, no timers: what a "
        "hand-off costs the server and the wake-ups between processes, which no client of this protocol "
        "goes below.")
    add("")

    # ---- W4
    add("## W4 — 200 waiters in 20 processes on one name (%.0f s, hold 1 ms)" % size["w4_s"])
    add("")
    add("| measure | dlock |")
    add("|---|---|")
    for k, label in (("steady_commands_per_handoff",
                      "commands sent per hand-off, steady state (target ≤ 3; %.0f s after the start to "
                      "%.0f s before the end)" % (size["w4_margin"], size["w4_margin"])),
                     ("steady_evalsha_per_handoff", "of which EVALSHA"),
                     ("commands_per_handoff", "commands sent per hand-off, whole run"),
                     ("evalsha_per_handoff", "of which EVALSHA"),
                     ("subscribe_per_handoff", "of which SUBSCRIBE"),
                     ("unsubscribe_per_handoff", "of which UNSUBSCRIBE"),
                     ("ping_per_handoff", "of which PING"),
                     ("script_commands_per_handoff", "commands run inside the scripts per hand-off"),
                     ("handoffs_per_s", "hand-offs/s"),
                     ("subscribe_errors", "subscribe errors (failed/rejected SUBSCRIBE + refused by the client)"),
                     ("error_replies", "error replies of any kind (`INFO errorstats` delta)"),
                     ("client_errors", "errors seen by the clients")):
        add("| %s | %s |" % (label, cell(res, "w4", "dlock", k, 0 if "error" in k else 2)))
    add("")
    add("Each process is one client with 10 threads looping `try_lock_for(until the end)`, 1 ms hold, "
        "`unlock()`. Commands are `INFO commandstats` deltas from the common start to the last process's "
        "exit; *sent* excludes the commands the scripts run inside Redis (%s), which `commandstats` counts "
        "too, and INFO itself. A hand-off is one acquisition. The whole run includes what each of the 200 "
        "waiters costs once, not per hand-off: its arrival (the first attempt, the SUBSCRIBE of its process's "
        "first waiter, the check after the subscription is confirmed) and its departure at the end (the "
        "leave that takes it out of the queue); the steady state is the same count over a window that "
        "leaves both out, with hand-offs counted by the processes themselves (acquisitions whose time falls in the window, on the shared clock)."
        % ", ".join(sorted(SCRIPT_INTERNAL["dlock"])))
    add("")

    # ---- W5, W6
    add("## W5 — %s watchdog locks held in one process (watchdog lease %s, 3 renewal periods)" % (
        fmt(res.med("w5", "dlock", "locks")), size["w5_watchdog"]))
    add("")
    add("| measure | dlock |")
    add("|---|---|")
    for k, label, d in (("lost", "leases lost (`lease.lost()` requested or not owned)", 0),
                        ("scripts_per_100_holds_per_period", "renewal scripts per 100 holds per period (target ≤ 1)", 3),
                        ("scripts_per_100_renewals", "renewal scripts per 100 renewals", 3),
                        ("renewals_per_hold", "renewals per hold in the window (3 expected)", 2),
                        ("rss_per_lock", "client memory per held lock (RSS delta ÷ locks), bytes", 0),
                        ("acquire_s", "time to take them all (async, 1000 in flight), s", 2),
                        ("acquire_failed", "acquisitions failed", 0), ("release_failed", "releases failed", 0)):
        add("| %s | %s |" % (label, cell(res, "w5", "dlock", k, d)))
    add("")
    add("Renewal scripts are `cmdstat_evalsha` deltas over the window of 3 periods (nothing else runs "
        "then); renewed holds are `cmdstat_hexists` deltas (one HEXISTS per mutex hold in `lock_renew.lua`).")
    add("")
    add("## W6 — Redis memory per held lock (%s locks)" % fmt(res.med("w6", "dlock", "locks")))
    add("")
    add("| measure | dlock (fencing on, the default: one counter per cluster slot) | dlock `fencing=off` |")
    add("|---|---|---|")
    for k, label, d in (("bytes_per_lock", "`used_memory` delta per held lock, bytes (target ≤ 200)", 0),
                        ("keys_per_lock", "keys per held lock", 2),
                        ("bytes_left_per_released_lock", "bytes left per lock after all were released", 0),
                        ("keys_left_per_released_lock", "keys left per released lock", 2)):
        add("| %s | %s | %s |" % (label, cell(res, "w6", "dlock", k, d), cell(res, "w6", "dlock-nofence", k, d)))
    add("")
    add("Names are `bench:w6:rN:%%08d` (18 bytes), owners dlock's `<uuid>:<n>` (38–39 bytes), leases 10 min; "
        "the database is flushed before and after. The locks are spread over %s clients of one process "
        "(taking them all: %s s, releasing them: %s s): in a single client, taking 100,000 locks costs minutes "
        "of client CPU (see the W5/W6 findings), which says nothing about Redis' memory." % (
            fmt(res.med("w6", "dlock", "clients"), 0), cell(res, "w6", "dlock", "acquire_s"),
            cell(res, "w6", "dlock", "release_s")))
    add("")

    runner.family.section(add, size)
    runner.semaphores.section(add, size)
    runner.redlock.section(add, size)
    runner.cluster.section(add, size, m.get("nproc"))

    # ---- findings
    if findings_path and os.path.exists(findings_path):
        with open(findings_path) as f:
            add(f.read().rstrip())
        add("")
    if res.data.get("diag"):
        add("### Measurements behind the W1 and W2 findings")
        add("")
        add("`perf stat -e context-switches,task-clock` and `strace -f -c` of the W1 programs, %s pairs "
            "each (all threads; strace slows the run but counts exactly). Per lock+unlock pair:" % fmt(size["diag_n"]))
        add("")
        names = [n for n in ("floor-pair", "dlock-sync", "dlock-async") if n in res.data["diag"]]
        w2 = [n for n in ("w2-async", "w2-threads") if n in res.data["diag"]]
        sysc = sorted({k for n in names for k in res.data["diag"][n] if k.startswith("sys_")},
                      key=lambda k: -max(res.med("diag", n, k) if finite(res.med("diag", n, k)) else 0 for n in names))
        sysc = [k for k in sysc if max(res.med("diag", n, k) if finite(res.med("diag", n, k)) else 0 for n in names) >= 0.5]
        add("| | " + " | ".join(names) + " |")
        add("|---|" + "---|" * len(names))
        for k, label in [("cs_per_pair", "context switches"), ("cpu_us_per_pair", "CPU time (task-clock), µs"),
                         ("syscalls_per_pair", "system calls")] + [(k, "`" + k[4:] + "`") for k in sysc]:
            if any(res.get("diag", n, k) for n in names):
                add("| %s | %s |" % (label, " | ".join(fmt(res.med("diag", n, k), 1) for n in names)))
        add("")
        if w2:
            add("W2 (1×50) under `perf stat`, per pair: async chains %s context switches and %s µs of CPU; "
                "50 threads on the blocking API %s context switches and %s µs of CPU." % (
                    fmt(res.med("diag", "w2-async", "cs_per_pair")), fmt(res.med("diag", "w2-async", "cpu_us_per_pair")),
                    fmt(res.med("diag", "w2-threads", "cs_per_pair")), fmt(res.med("diag", "w2-threads", "cpu_us_per_pair"))))
            add("")
    scaling = [n for n in size["diag_scaling"] if res.get("diag", "scaling-%d" % n, "acquire_s")]
    if scaling:
        add("### Measurements behind the W5 and W6 findings")
        add("")
        add("One client taking N locks (10-minute leases, 2,000 in flight) and releasing them "
            "(`dlock_load w6 --clients 1`):")
        add("")
        add("| N | take all, s | release all, s | µs per acquisition |")
        add("|---|---|---|---|")
        for n in scaling:
            acq = res.med("diag", "scaling-%d" % n, "acquire_s")
            add("| %s | %s | %s | %s |" % (fmt(n), fmt(acq), fmt(res.med("diag", "scaling-%d" % n, "release_s")),
                                          fmt(acq * 1e6 / n, 1)))
        add("")

    add("## Re-running")
    add("")
    add("```sh")
    add("scripts/bench            # everything, 3 repetitions: rewrites docs/benchmarks.md and docs/bench/*.png")
    add("scripts/bench --quick    # < 60 s smoke run: checks that every workload produced numbers")
    add("```")
    add("")
    add("`scripts/bench` installs what it needs (Debian packages through `scripts/setup`, "
        "python3-matplotlib, nodejs/npm; `redlock@4` and `ioredis@5` with `npm install --prefix "
        "build/bench-node`), builds the `release` preset, starts its own `redis-server` on a free "
        "loopback port in a temporary directory, runs `bench/run.py` and stops the server. The pieces: "
        "`bench/floor_pair.cpp` (the floor pair), `bench/pair_bench.cpp` (W1, Google Benchmark), "
        "`bench/load.cpp` and `bench/load_*.cpp` (`dlock_load`, W2–W6), `bench/peers/` (redis-py "
        "and node-redlock), `bench/run.py` (the sitting, this report and the plots), `bench/family.py` "
        "(fair_mutex's and shared_mutex's rows and section), `bench/semaphores.py` (leased_semaphore's "
        "and `dlock exec --permits`'), `bench/redlock.py` and `bench/redlock_report.py` (red_lock against "
        "node-redlock over 3 and 5 servers), `bench/cluster.py` "
        "(the 3+3 cluster) and `bench/cluster_bench.py` (its rows and section), "
        "`bench/findings.md` (the analysis below the tables).")
    add("")
    with open(md_path, "w") as f:
        f.write("\n".join(L))
    plots(runner, plot_dir)


def read_samples(paths):
    out = []
    for p in paths:
        try:
            with open(p) as f:
                out.extend(float(x) for x in f if x.strip())
        except OSError:
            pass
    return out


COLORS = {"floor-pair": "#555555", "floor-w3": "#555555", "dlock-sync": "#1f77b4", "dlock-async": "#17becf", "dlock": "#1f77b4",
          "dlock-threads": "#aec7e8", "redis-py": "#d62728", "node-redlock": "#2ca02c", family.W3: "#9467bd"}


def plots(runner, plot_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = runner.res
    os.makedirs(plot_dir, exist_ok=True)

    def cdf(ax, values, label, color):
        if not values:
            return
        s = sorted(values)
        n = len(s)
        step = max(1, n // 2000)
        xs = s[::step] + [s[-1]]
        ys = [i / n for i in range(0, n, step)] + [1.0]
        ax.plot(xs, ys, label=label, color=color)

    # W1: latency distributions
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for s in ["floor-pair", "dlock-sync", "dlock-async"] + runner.peers():
        vals = read_samples(runner.samples.get(("w1", s), []))
        vals = [v for v in vals if v > 0]
        cdf(ax, vals, "%s (p50 %s µs)" % (s, fmt(res.med("w1", s, "p50_us"), 0)), COLORS.get(s))
    ax.set_xscale("log")
    ax.set_xlabel("lock+unlock pair latency, µs (log)")
    ax.set_ylabel("fraction of pairs")
    ax.set_title("W1: one client, lock+unlock loop (all repetitions)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(plot_dir, "w1_latency.png"), dpi=110)
    plt.close(fig)

    # W2: throughput per system
    fig, ax = plt.subplots(figsize=(8, 4.5))
    systems = [s for s in ["dlock-async", "dlock-threads"] + runner.peers() if res.get("w2", s, "1x50_pairs_per_s")
               or res.get("w2", s, "4x50_pairs_per_s")]
    width = 0.8 / max(1, len(systems))
    for i, s in enumerate(systems):
        meds, lo, hi = [], [], []
        for cfg in ("1x50", "4x50"):
            med = res.med("w2", s, cfg + "_pairs_per_s")
            a, b = res.spread("w2", s, cfg + "_pairs_per_s")
            meds.append(med if finite(med) else 0)
            lo.append(med - a if finite(med) else 0)
            hi.append(b - med if finite(med) else 0)
        xs = [k + (i - (len(systems) - 1) / 2) * width for k in range(2)]
        ax.bar(xs, meds, width, yerr=[lo, hi], capsize=3, label=s, color=COLORS.get(s))
    floor = res.med("floor", "c50", "pairs_per_s")
    if finite(floor):
        ax.axhline(floor, color="#555555", linestyle="--", label="floor: -c 50 -P 1 pairs/s")
        ax.axhline(1.5 * floor, color="#555555", linestyle=":", label="target: 1.5 × floor")
    ax.set_xticks([0, 1])
    ax.set_xticklabels(["1 process × 50 lockers", "4 processes × 50 lockers"])
    ax.set_ylabel("lock+unlock pairs/s (median, min–max)")
    ax.set_title("W2: 50 lockers on distinct names")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(plot_dir, "w2_throughput.png"), dpi=110)
    plt.close(fig)

    # W3: throughput, wait and hand-off distributions
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    systems = [s for s in ["floor-w3", "dlock", family.W3] + runner.peers() if s in runner.w3_raw]
    meds = [res.med("w3", s, "acq_per_s") for s in systems]
    errs = [[m - res.spread("w3", s, "acq_per_s")[0] for s, m in zip(systems, meds)],
            [res.spread("w3", s, "acq_per_s")[1] - m for s, m in zip(systems, meds)]]
    axes[0].bar(systems, meds, yerr=errs, capsize=3, color=[COLORS.get(s) for s in systems])
    floor_w3 = res.med("w3", "floor-w3", "acq_per_s")
    if finite(floor_w3):
        axes[0].axhline(0.97 * floor_w3, color="#555555", linestyle=":", label="target: 0.97 × the floor")
        axes[0].legend(fontsize=8)
    rtt = res.med("floor", "ping", "rtt_us")
    axes[0].set_ylabel("acquisitions/s")
    axes[0].set_title("W3: throughput")
    for s in systems:
        cdf(axes[1], [max(v, 1.0) for v in runner.w3_raw[s]["wait"]], s, COLORS.get(s))
        cdf(axes[2], runner.w3_raw[s]["handoff"], s, COLORS.get(s))
    if finite(rtt):
        axes[2].axvline(3 * rtt, color="#555555", linestyle=":", label="3 RTT")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("wait (call → acquired), µs (log)")
    # Hand-offs can be negative (the next taker's reply arrived before the releaser's): a
    # symmetric log scale, linear within ±10 µs.
    axes[2].set_xscale("symlog", linthresh=10)
    axes[2].set_xlabel("hand-off (unlock returned → next acquired), µs (symlog)")
    for ax in (axes[1], axes[2]):
        ax.set_ylabel("fraction")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[1].set_title("W3: wait (last repetition)")
    axes[2].set_title("W3: hand-off (last repetition)")
    fig.tight_layout()
    fig.savefig(os.path.join(plot_dir, "w3_latency.png"), dpi=110)
    plt.close(fig)


# ---- the --quick check ---------------------------------------------------------------------------

def check(runner):
    """Every workload ran and produced numbers (not judged). Returns the list of problems."""
    res = runner.res
    problems_extra = []
    want = [("floor", "ping", "rtt_us"), ("floor", "c50", "pairs_per_s"), ("w1", "floor-pair", "p50_us"),
            ("floor", "idle-ping", "after_hold_p50_us"), ("floor", "idle-ping", "back_to_back_p50_us")]
    for s in ["dlock-sync", "dlock-async"] + runner.peers():
        want += [("w1", s, "p50_us"), ("w1", s, "p99_us"), ("w1", s, "p50_vs_floor")]
    for s in ["dlock-async", "dlock-threads"] + runner.peers():
        want += [("w2", s, "1x50_pairs_per_s"), ("w2", s, "4x50_pairs_per_s"), ("w2", s, "1x50_vs_floor")]
        if runner.peers() and s.startswith("dlock"):
            want += [("w2", s, "1x50_vs_best_peer"), ("w2", s, "4x50_vs_best_peer")]
    for s in ["floor-w3", "dlock"] + runner.peers():
        want += [("w3", s, m) for m in ("acq_per_s", "wait_p50_us", "wait_p99_us", "handoff_p50_us",
                                        "handoff_p99_us", "jain", "acq_vs_ideal_rtt_after_hold")]
    want.append(("w3", "dlock", "acq_vs_floor"))
    # The floor and dlock must also have kept the lock exclusive and reported no errors.
    for s in ("floor-w3", "dlock"):
        for m in ("overlaps", "errors"):
            vals = res.get("w3", s, m)
            if vals and any(v != 0 for v in vals):
                problems_extra.append("w3 %s: %s is not 0 (%s)" % (s, m, vals))
    want += [("w4", "dlock", m) for m in ("commands_per_handoff", "steady_commands_per_handoff",
                                          "subscribe_errors", "handoffs")]
    want += [("w5", "dlock", m) for m in ("lost", "scripts_per_100_holds_per_period", "rss_per_lock")]
    want += [("w6", s, m) for s in ("dlock", "dlock-nofence") for m in ("bytes_per_lock",)]
    positive = {"rtt_us", "after_hold_p50_us", "back_to_back_p50_us", "acq_vs_ideal_rtt_after_hold",
                "pairs_per_s", "p50_us", "p99_us", "1x50_pairs_per_s", "4x50_pairs_per_s",
                "acq_per_s", "wait_p50_us", "wait_p99_us", "jain", "handoffs", "commands_per_handoff",
                "steady_commands_per_handoff", "acq_vs_floor",
                "scripts_per_100_holds_per_period", "bytes_per_lock", "p50_vs_floor", "1x50_vs_floor",
                "1x50_vs_best_peer", "4x50_vs_best_peer"}
    extra_wants = runner.cluster.wants() + runner.family.wants() + runner.semaphores.wants() + runner.redlock.wants()
    want += extra_wants
    positive |= {m for _, _, m in extra_wants}
    problems = ["step failed: " + e for e in res.errors] + problems_extra + runner.family.problems() + \
        runner.semaphores.problems() + runner.redlock.problems()
    for w, s, m in want:
        vals = res.get(w, s, m)
        if not vals:
            problems.append("%s %s: no %s" % (w, s, m))
        elif not all(finite(v) for v in vals):
            problems.append("%s %s: %s is not a number (%s)" % (w, s, m, vals))
        elif m in positive and not all(v > 0 for v in vals):
            problems.append("%s %s: %s is not positive (%s)" % (w, s, m, vals))
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bin", required=True, help="directory of dlock_floor_pair, dlock_floor_ping, dlock_floor_w3, dlock_bench_pair, dlock_load")
    p.add_argument("--work", required=True, help="scratch directory (samples; the --quick report)")
    p.add_argument("--reps", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--md", default=None, help="default docs/benchmarks.md (--quick: under --work)")
    p.add_argument("--plots", default=None, help="default docs/bench (--quick: under --work)")
    p.add_argument("--findings", default=os.path.join(HERE, "findings.md"))
    p.add_argument("--node-modules", default="")
    p.add_argument("--skip-node", default="")
    p.add_argument("--skip-redis-py", default="")
    a = p.parse_args()
    if a.skip_node:
        a.node_modules = ""
        loud("node-redlock SKIPPED: %s" % a.skip_node)
    if a.skip_redis_py:
        loud("redis-py SKIPPED: %s" % a.skip_redis_py)
    t0 = time.monotonic()
    slack = set_timer_slack(TIMER_SLACK_NS)
    runner = Runner(a)
    runner.timer_slack = slack
    # The cluster's servers are this process's children: SIGTERM must reach the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        runner.run()
    finally:
        runner.cluster.stop()
        runner.redlock.stop()
    elapsed = time.monotonic() - t0
    base = a.work if a.quick else os.path.join(ROOT, "docs")
    md = os.path.abspath(a.md or os.path.join(base, "benchmarks.md"))
    plot_dir = os.path.abspath(a.plots or os.path.join(base, "bench"))
    os.makedirs(os.path.dirname(md), exist_ok=True)
    plot_rel = os.path.relpath(plot_dir, os.path.dirname(md))
    try:
        write_report(runner, md, plot_dir, plot_rel, a.findings, elapsed)
        log("report: %s, plots: %s" % (md, plot_dir))
    except Exception as e:
        runner.res.errors.append("report: %r" % e)
        loud("FAILED to write the report: %r" % e)
    problems = check(runner)
    if problems:
        loud("%d problem(s):\n" % len(problems) + "\n".join("   - " + x for x in problems))
        return 1
    log("every workload ran and produced numbers (%.0f s)" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
