"""bench/cluster.py — a Redis Cluster of 3 masters and 3 replicas on this host, for W1 and W2
beside the single server in the same run (issue 23, item 7).

run.py starts a LocalCluster before the first repetition and stops it at the end (by PID, each
server it started). Its systems ("cluster:dlock", "cluster:redis-py", ...) join W1's and W2's
rotations (bench/cluster_bench.py: what they need, their ratios, the report). Names spread:
W1 cycles over one hash tag per master (tags()); W2's 50 names of a process are picked so that
each master serves a third of them (spread()).
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis

CLUSTER = "cluster:"  # the prefix of the cluster's systems in the rotations
SLOTS = 16384
TAGS = "0123456789abcdefghijklmnopqrstuvwxyz"


class ClusterError(Exception):
    pass


def free_ports(n):
    """n loopback ports nothing listens on now (all held open at once, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalCluster:
    """Six redis-servers on free loopback ports, each in its own temporary directory, joined by
    `redis-cli --cluster create --cluster-replicas 1`: 3 masters with a replica each."""

    NODES = 6

    def __init__(self, work, key_slot):
        self.work, self.key_slot = work, key_slot
        self.procs, self.ports, self.dirs = [], [], []
        self.masters = {}  # port -> [(first slot, last slot)]

    def start(self, timeout=60.0):
        last = None
        for _ in range(3):  # a free port may be taken before the server binds it: new ports
            try:
                deadline = time.monotonic() + timeout
                self._spawn(deadline)
                self._create()
                self._wait_ok(deadline)
                self.masters = self.read_map()
                return
            except (ClusterError, redis.RedisError, OSError) as e:
                last = e
                self.stop()
        raise ClusterError("the cluster did not start: %s" % last)

    def stop(self):
        for p in self.procs:  # by PID, each server this object started
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

    def _spawn(self, deadline):
        ports = free_ports(2 * self.NODES)
        self.ports, buses = ports[:self.NODES], ports[self.NODES:]
        for port, bus in zip(self.ports, buses):
            d = tempfile.mkdtemp(prefix="cluster-%d-" % port, dir=self.work)
            self.dirs.append(d)
            self.procs.append(subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-node-timeout", "1000", "--cluster-port", str(bus), "--save", "",
                 "--appendonly", "no", "--dir", d, "--logfile", os.path.join(d, "redis.log"),
                 "--daemonize", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port, p, d in zip(self.ports, self.procs, self.dirs):
            while True:
                try:
                    if redis.Redis(port=port, socket_timeout=1).ping():
                        break
                except redis.ConnectionError:
                    pass
                if p.poll() is not None or time.monotonic() > deadline:
                    raise ClusterError("redis-server on port %d did not start: %s" % (port, self._log_tail(d)))
                time.sleep(0.02)

    def _create(self):
        p = subprocess.run(["redis-cli", "--cluster", "create"] + ["127.0.0.1:%d" % x for x in self.ports] +
                           ["--cluster-replicas", "1", "--cluster-yes"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise ClusterError("redis-cli --cluster create exited %d: %s" % (p.returncode, (p.stdout + p.stderr)[-800:]))

    def _wait_ok(self, deadline):
        """Every node sees the whole cluster in state ok, every replica's link to its master up."""
        while True:
            pending = []
            for port in self.ports:
                r = redis.Redis(port=port, socket_timeout=1)
                info = r.execute_command("CLUSTER INFO")
                if (info.get("cluster_state") != "ok" or int(info.get("cluster_slots_ok", 0)) != SLOTS or
                        int(info.get("cluster_known_nodes", 0)) != self.NODES):
                    pending.append("%d: %s" % (port, info.get("cluster_state")))
                repl = r.info("replication")
                if repl.get("role") == "slave" and repl.get("master_link_status") != "up":
                    pending.append("%d: replica link %s" % (port, repl.get("master_link_status")))
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ClusterError("not ready: " + "; ".join(pending))
            time.sleep(0.1)

    def read_map(self):
        """{master port: [(first slot, last slot)]}, as CLUSTER SLOTS gives it now."""
        out = {}
        for first, last, master, *_ in redis.Redis(port=self.ports[0]).execute_command("CLUSTER SLOTS"):
            out.setdefault(int(master[1]), []).append((int(first), int(last)))
        if len(out) != self.NODES // 2:
            raise ClusterError("%d masters, not %d" % (len(out), self.NODES // 2))
        return out

    def _log_tail(self, d):
        try:
            with open(os.path.join(d, "redis.log")) as f:
                return " | ".join(f.read().splitlines()[-5:])
        except OSError:
            return "(no log)"

    # ---- what the workloads need ---------------------------------------------------------------

    def master_of(self, key):
        slot = self.key_slot(key)
        return next(port for port, ranges in self.masters.items() if any(a <= slot <= b for a, b in ranges))

    def tags(self):
        """One hash tag per master, in the masters' order: the first of 0-9a-z, then two letters, on it."""
        out = {}
        for t in list(TAGS) + [a + b for a in TAGS for b in TAGS]:
            out.setdefault(self.master_of("{%s}" % t), t)
            if len(out) == len(self.masters):
                return [out[p] for p in sorted(out)]
        raise ClusterError("no hash tag for some master")

    def spread(self, prefix, n):
        """`prefix` with the first suffix (none, ":s1", ":s2", ...) under which names prefix:0 ..
        prefix:n-1 fall on the masters evenly (counts differ by at most one)."""
        for k in range(10000):
            p = prefix if k == 0 else "%s:s%d" % (prefix, k)
            counts = dict.fromkeys(self.masters, 0)
            for i in range(n):
                counts[self.master_of("%s:%d" % (p, i))] += 1
            if max(counts.values()) - min(counts.values()) <= 1:
                return p
        raise ClusterError("no even spread of %s" % prefix)

    def cpu_s(self):
        """CPU seconds (user + sys) each server used so far: (masters, replicas), by INFO cpu."""
        m = r = 0.0
        for port in self.ports:
            c = redis.Redis(port=port, socket_timeout=2).info("cpu")
            used = float(c["used_cpu_user"]) + float(c["used_cpu_sys"])
            if port in self.masters:
                m += used
            else:
                r += used
        return m, r

