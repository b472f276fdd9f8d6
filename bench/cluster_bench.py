"""bench/cluster_bench.py — the cluster's rows of W1 and W2 (issue 23, item 7): what run.py's
Runner needs to run them on the LocalCluster (bench/cluster.py), each repetition's
cluster-to-single ratios and comparisons with the best peer, and the report's section.

Every ratio is taken within a repetition, as run.py's: the cluster's chunks run in the same
rotation as the single server's. Six servers share this host's cores with the clients, so the
cluster's throughput is reported, not held to a target; the CPU that servers and clients spent
per pair (the servers' INFO cpu, the load processes' own count) is what the scaling paragraph
reasons from.
"""
import statistics

from cluster import CLUSTER, LocalCluster

W1 = ["dlock-sync", "dlock-async"]
W2 = ["dlock-async", "dlock-threads"]
CPU_KEYS = ("master_us", "replica_us", "client_us")


class ClusterBench:
    """lib: run.py's module (its helpers pct, read_samples, finite, fmt, cell, key_slot); passed
    in, not imported, since run.py runs as __main__."""

    def __init__(self, runner, lib):
        self.runner, self.lib, self.res = runner, lib, runner.res
        self.local = None
        self.names = ""
        self.best_peers = {}  # measure -> the best peer on the cluster, per repetition

    # ---- the cluster ---------------------------------------------------------------------------

    def start(self):
        local = LocalCluster(self.runner.a.work, self.lib.key_slot)
        local.start()
        self.local = local  # stopped at the end from here on, whatever fails next
        self.names = ",".join("bench:w1:{%s}" % t for t in local.tags())

    def stop(self):
        if self.local:
            self.local.stop()
            self.local = None

    def up(self):
        return self.local is not None

    def seeds(self):
        return ",".join("127.0.0.1:%d" % p for p in self.local.ports)

    def url(self):
        return "redis+cluster://" + self.seeds()

    def peer_args(self):
        return ["--cluster", self.seeds()]

    def w1_systems(self):
        return [CLUSTER + s for s in ["dlock"] + self.runner.peers()] if self.up() else []

    def w2_systems(self):
        return [CLUSTER + s for s in W2 + self.runner.peers()] if self.up() else []

    def spread(self, prefix, n):
        return self.local.spread(prefix, n)

    # ---- CPU of a W2 chunk ---------------------------------------------------------------------

    def server_cpu_s(self, system):
        """(masters, replicas) CPU seconds so far, by INFO cpu; the single server is a master."""
        if system.startswith(CLUSTER):
            return self.local.cpu_s()
        c = self.runner.r.info("cpu")
        return float(c["used_cpu_user"]) + float(c["used_cpu_sys"]), 0.0

    def add_cpu(self, system, procs, before, outs):
        """Adds a W2 chunk's CPU to its repetition's: the servers' from before the load processes
        started to after they ended (idle but for them), the processes' own from their start line
        to their end (`cpu_s`: their start-up left out), and the window (the longest process's)."""
        after = self.server_cpu_s(system)
        chunk = (after[0] - before[0], after[1] - before[1], sum(o["cpu_s"] for o in outs),
                 max(o["seconds"] for o in outs))
        acc = self.runner.cur.setdefault("w2_cpu", {}).setdefault((system, procs), [0.0] * 4)
        for i in range(4):
            acc[i] += chunk[i]

    # ---- a repetition's numbers ----------------------------------------------------------------

    def put(self, w, s, m, v):
        self.res.put(w, s, m, v)

    def best(self, measure, values, lower_is_better):
        """The best peer's value of `values` ({peer: value}), remembered per repetition."""
        if not values:
            return None
        name = (min if lower_is_better else max)(values, key=values.get)
        self.best_peers.setdefault(measure, []).append(name)
        return values[name]

    def w1_finish(self, rep):
        lib, peers = self.lib, self.runner.peers()
        stats = {}
        for key, paths in self.runner.rep_samples.items():
            v = lib.read_samples(paths)
            if v:
                stats[key] = {"p50_us": lib.pct(v, 0.5), "p99_us": lib.pct(v, 0.99), "mean_us": statistics.mean(v)}
        for s in W1 + peers:
            c, single = stats.get(CLUSTER + s), stats.get(s)
            if not c:
                continue
            for k, x in c.items():
                self.put("cluster-w1", s, k, x)
            if single:
                for k in ("p50_us", "p99_us"):
                    self.put("cluster-w1", s, k[:3] + "_vs_single", c[k] / single[k])
        for k in ("p50_us", "p99_us"):
            best = self.best("w1 " + k[:3], {p: stats[CLUSTER + p][k] for p in peers if CLUSTER + p in stats}, True)
            for s in W1:
                if best and CLUSTER + s in stats:
                    self.put("cluster-w1", s, k[:3] + "_vs_best_peer", stats[CLUSTER + s][k] / best)

    def w2_finish(self, procs, rep):
        key, cur, peers = "%dx50" % procs, self.runner.cur, self.runner.peers()
        rates = {}
        for (system, p), (pairs, secs, errors) in cur.get("w2", {}).items():
            if p != procs or secs <= 0:
                continue
            rates[system] = pairs / secs
            cpu = cur.get("w2_cpu", {}).get((system, p))
            if cpu and cpu[3] > 0 and pairs:
                for k, x in zip(CPU_KEYS, cpu):
                    self.put("cluster-cpu", system, key + "_" + k, x / pairs * 1e6)
                self.put("cluster-cpu", system, key + "_cores", sum(cpu[:3]) / cpu[3])
            if system.startswith(CLUSTER):
                self.put("cluster-w2", system[len(CLUSTER):], key + "_errors", errors)
        for s in W2 + peers:
            c = rates.get(CLUSTER + s)
            if c is None:
                continue
            self.put("cluster-w2", s, key + "_pairs_per_s", c)
            if rates.get(s):
                self.put("cluster-w2", s, key + "_vs_single", c / rates[s])
        best = self.best("w2 " + key, {p: rates[CLUSTER + p] for p in peers if CLUSTER + p in rates}, False)
        for s in W2:
            if best and CLUSTER + s in rates:
                self.put("cluster-w2", s, key + "_vs_best_peer", rates[CLUSTER + s] / best)
        if self.up() and self.local.read_map() != self.local.masters:
            raise RuntimeError("the cluster's masters changed during the run (a failover?)")

    # ---- the --quick check ---------------------------------------------------------------------

    def wants(self):
        """(workload, system, metric) that must be positive numbers after a run."""
        peers = self.runner.peers()
        out = []
        for s in W1 + peers:
            out += [("cluster-w1", s, m) for m in ("p50_us", "p99_us", "p50_vs_single", "p99_vs_single")]
        for s in W2 + peers:
            out += [("cluster-w2", s, k + m) for k in ("1x50", "4x50") for m in ("_pairs_per_s", "_vs_single")]
            out += [("cluster-cpu", CLUSTER + s, k + "_master_us") for k in ("1x50", "4x50")]
        out += [("cluster-w5", "dlock", "scripts_per_100_holds_per_period")]
        if peers:
            out += [("cluster-w1", s, "p50_vs_best_peer") for s in W1]
            out += [("cluster-w2", s, k + "_vs_best_peer") for s in W2 for k in ("1x50", "4x50")]
        return out

    # ---- the report ----------------------------------------------------------------------------

    def named(self, measure):
        bests = self.best_peers.get(measure, [])
        return ", ".join(sorted(set(bests), key=bests.index)) or "—"

    def target_rows(self, row):
        """The Targets table's rows: dlock on the cluster against the best peer there."""
        if not self.runner.peers():
            return
        for s, label in (("dlock-sync", "sync"), ("dlock-async", "async")):
            for q in ("p50", "p99"):
                row("W1 cluster", "dlock %s %s ÷ the best peer's on the cluster (%s)" % (label, q, self.named("w1 " + q)),
                    "cluster-w1", s, q + "_vs_best_peer", "≤ 1", lambda x: x <= 1.0, digits=3, unit="×")
        for procs in (1, 4):
            k = "%dx50" % procs
            for s, label in (("dlock-async", "async"), ("dlock-threads", "50 threads")):
                row("W2 cluster", "%d×50, dlock %s pairs/s ÷ the best peer's on the cluster (%s)" % (
                    procs, label, self.named("w2 " + k)), "cluster-w2", s, k + "_vs_best_peer", "≥ 1",
                    lambda x: x >= 1.0, digits=3, unit="×")

    def section(self, add, size, nproc):
        lib, res, peers = self.lib, self.res, self.runner.peers()
        cell, fmt = lib.cell, lib.fmt
        add("## Cluster (3+3) — W1 and W2 on 3 masters with a replica each")
        add("")
        add("Six `redis-server`s on loopback ports of this host (`--cluster-enabled yes --cluster-node-timeout "
            "1000 --save '' --appendonly no`), joined by `redis-cli --cluster create --cluster-replicas 1`, "
            "started by `bench/cluster.py` before the first repetition and stopped after the last. W1 and W2 "
            "are the workloads above, in the same repetitions: the cluster's chunks take their turns in the "
            "same rotation as the single server's, so each ratio compares the same minute. The clients: "
            "dlock with a `redis+cluster://` URL naming the six nodes; redis-py's `redis.cluster.RedisCluster` "
            "and its `Lock`; node-redlock over one ioredis `Cluster` client (what redlock's README prescribes "
            "for a single cluster). Names spread over the masters: W1's loop takes its pairs on three names in "
            "turn, one hash tag per master (`bench:w1:{t}:...`); each W2 process's 50 names are picked so "
            "that every master serves a third of them (16 or 17). Six servers, their replication and the "
            "clients share this host's %s cores, so the cluster's numbers are reported as ratios to the "
            "single server's, not held to a target." % nproc)
        add("")
        add("| W1 system | p50 | p99 | p50 cluster ÷ single | p99 cluster ÷ single | p50 ÷ best peer's | p99 ÷ best peer's |")
        add("|---|---|---|---|---|---|---|")
        for s in W1 + peers:
            add("| %s | %s µs | %s µs | %s | %s | %s | %s |" % (
                s, cell(res, "cluster-w1", s, "p50_us", 0), cell(res, "cluster-w1", s, "p99_us", 0),
                cell(res, "cluster-w1", s, "p50_vs_single", unit="×"), cell(res, "cluster-w1", s, "p99_vs_single", unit="×"),
                cell(res, "cluster-w1", s, "p50_vs_best_peer", unit="×"), cell(res, "cluster-w1", s, "p99_vs_best_peer", unit="×")))
        add("")
        add("| W2 system | 1×50 pairs/s | 4×50 pairs/s | 1×50 cluster ÷ single | 4×50 cluster ÷ single | "
            "1×50 ÷ best peer's | 4×50 ÷ best peer's | errors (1×50, 4×50) |")
        add("|---|---|---|---|---|---|---|---|")
        for s in W2 + peers:
            add("| %s | %s | %s | %s | %s | %s | %s | %s, %s |" % (
                s, cell(res, "cluster-w2", s, "1x50_pairs_per_s", 0), cell(res, "cluster-w2", s, "4x50_pairs_per_s", 0),
                cell(res, "cluster-w2", s, "1x50_vs_single", unit="×"), cell(res, "cluster-w2", s, "4x50_vs_single", unit="×"),
                cell(res, "cluster-w2", s, "1x50_vs_best_peer", unit="×"), cell(res, "cluster-w2", s, "4x50_vs_best_peer", unit="×"),
                cell(res, "cluster-w2", s, "1x50_errors", 0), cell(res, "cluster-w2", s, "4x50_errors", 0)))
        add("")
        add("Best peer on the cluster, per repetition: W1 p50 %s, p99 %s; W2 1×50 %s, 4×50 %s. A ratio to the "
            "best peer below 1 is better for latency (W1), above 1 for throughput (W2)." % (
                self.named("w1 p50"), self.named("w1 p99"), self.named("w2 1x50"), self.named("w2 4x50")))
        add("")
        add("W5 on the cluster (%s locks with random names, watchdog %s, 3 periods): %s renewal scripts per "
            "100 holds per period, %s leases lost. A script may touch one slot only, so the watchdog sends "
            "one per slot that has held locks, and %s names fall in nearly as many slots: W5's target "
            "(≤ 1, met on one server) cannot hold on a cluster unless the names share hash tags." % (
                fmt(res.med("w5", "dlock", "locks")), size["w5_watchdog"],
                cell(res, "cluster-w5", "dlock", "scripts_per_100_holds_per_period", 1),
                cell(res, "cluster-w5", "dlock", "lost", 0), fmt(res.med("w5", "dlock", "locks"))))
        add("")
        self.cpu_table(add, nproc)
        self.scaling(add, nproc)

    def cpu_table(self, add, nproc):
        res, cell = self.res, self.lib.cell
        add("### Where W2's CPU goes")
        add("")
        add("CPU time per lock+unlock pair, in µs, over each W2 chunk: the servers' (`INFO cpu` before the "
            "load processes start and after they end; the servers have nothing else to do), the load "
            "processes' own from their start line to their end (every thread; their start-up left out); "
            "*cores busy* is all of it over the chunk's seconds (of %s)." % nproc)
        add("")
        add("| system | on | 1×50 masters | replicas | clients | cores busy | 4×50 masters | replicas | clients | cores busy |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for s in W2 + self.runner.peers():
            for key, on in ((s, "single server"), (CLUSTER + s, "cluster")):
                cells = []
                for k in ("1x50", "4x50"):
                    cells += [cell(res, "cluster-cpu", key, "%s_%s" % (k, m), 1) for m in CPU_KEYS]
                    cells.append(cell(res, "cluster-cpu", key, k + "_cores", 2))
                if on == "single server":
                    cells[1] = cells[5] = "—"
                add("| %s | %s | %s |" % (s, on, " | ".join(cells)))
        add("")

    def scaling(self, add, nproc):
        """How throughput would grow with masters, from the CPU per pair measured here (dlock
        async, 4×50: the load that keeps the servers busiest)."""
        res, fmt = self.res, self.lib.fmt
        get = lambda key, m: res.med("cluster-cpu", key, "4x50_" + m)
        c = CLUSTER + "dlock-async"
        cm, cr, cc = (get(c, m) for m in CPU_KEYS)
        sm, sc = get("dlock-async", "master_us"), get("dlock-async", "client_us")
        rate = res.med("cluster-w2", "dlock-async", "4x50_pairs_per_s")
        try:
            bound = float(nproc) * 1e6 / (cm + cr + cc)
        except (TypeError, ValueError, ZeroDivisionError):
            bound = float("nan")
        add("### How throughput would scale with masters")
        add("")
        add("Each master runs its commands on one thread, and a lock's commands all go to its name's master, so "
            "with names spread evenly M masters can serve about M times what one serves — if every master, "
            "replica and client process has a core of its own. Here all of them share %s cores. In dlock async's "
            "4×50 chunks on the cluster a pair cost %s µs of CPU on the masters (the single server: %s), %s µs "
            "on the replicas (applying the writes their masters stream to them) and %s µs in the clients (on "
            "the single server: %s), and the servers and clients kept %s cores busy. With every core busy, "
            "this host could not run more than %s × 10⁶ / %s ≈ %s pairs/s on the cluster, whatever the number "
            "of masters (measured: %s): here the cluster-to-single ratio is what the extra servers and the "
            "replication cost on shared cores, not what masters bring." % (
                nproc, fmt(cm, 1), fmt(sm, 1), fmt(cr, 1), fmt(cc, 1), fmt(sc, 1), fmt(get(c, "cores")), nproc,
                fmt(cm + cr + cc, 1), fmt(bound), fmt(rate)))
        add("")
        add("With cores to spare, one master saturates at 10⁶ / its CPU per pair served, M masters at M times "
            "that; at a rate R the replicas need R × (their µs per pair) / 10⁶ cores and the clients "
            "R × (theirs) / 10⁶:")
        add("")
        add("| masters | ceiling R = M × 10⁶ / masters' µs per pair, pairs/s | cores that takes: masters + replicas + clients |")
        add("|---|---|---|")
        add("| 1 (the single server, no replica) | %s | %s |" % (fmt(per(sm)), need(per(sm), 0, sc, 1)))
        for m in (3, 6, 12):
            add("| %d | %s | %s |" % (m, fmt(m * per(cm)), need(m * per(cm), cr, cc, m)))
        add("")
        add("So on a machine with those cores throughput would grow about linearly with masters, each master "
            "bringing its own thread, until the clients run out of cores; one dlock client has one I/O thread, "
            "so the clients scale by processes (4×50), not by lockers per process. The ceilings are estimates "
            "from costs measured on %s shared cores, where the switches between six servers and the clients "
            "cost CPU too: with cores to spare the costs per pair would be lower and the ceilings higher. W1 "
            "does not scale with masters at all: one client with one request in flight waits a round trip per "
            "call whichever master answers, so its cluster-to-single ratio is the cost of the cluster on one "
            "request (routing, and the replica's share of the cores), not of the spread." % nproc)
        add("")

def per(us):
    """Pairs per second one thread serves at `us` µs of CPU per pair."""
    return 1e6 / us if us and us == us else float("nan")


def need(rate, cr, cc, masters):
    """The cores `rate` pairs/s takes: `masters` for the masters (each saturated), and the
    replicas' and clients' CPU (µs per pair) at that rate."""
    if not (rate == rate and cc == cc and cr == cr):
        return "—"
    replicas, clients = rate * cr / 1e6, rate * cc / 1e6
    return "%d + %.1f + %.1f ≈ %.0f" % (masters, replicas, clients, masters + replicas + clients)
