"""bench/redlock_report.py — the ratios, checks and report of bench/redlock.py (red_lock against
node-redlock over N servers), as a mixin of its RedlockBench (self.runner, self.lib, self.res,
self.cur, self.size, self.servers).

Baselines, from the same repetition and the same block of N (server 1 of the N):
- latency: the floor pair's p50 (p99) — one server's acquire+release, two round trips. A
  red_lock talks to its N servers at once, so 1 × floor is the ideal and N × floor the
  pessimistic bound of N servers asked one after the other; ratios to both.
- many names: `-c 50 -P 1` pairs/s F of one server. Each red_lock pair costs a pair on each of the
  N servers: F is the ideal (N servers on N hosts), F / N the bound when their work is serial
  (here, N servers on 2 shared cores).
- one name: floor-w3's acquisitions/s r1 (one server, the same processes, hold and think): the
  ideal; the pessimistic bound makes the lock's share of a cycle (1/r1 − hold) N times longer:
  1 / (hold + N·(1/r1 − hold)).
dlock ÷ node-redlock: latency below 1 and throughput above 1 put dlock ahead.
"""
import json
import os
import statistics
import subprocess

NAN = float("nan")


class Report:
    # ---- statistics ----------------------------------------------------------------------------

    def w3_stats(self, outs):
        pct = self.lib.pct
        start = min(int(o["start"]) for o in outs)
        deadline = max(int(o["deadline"]) for o in outs)
        events, counts = [], []
        for o in outs:
            ev = [[int(x) for x in e] for e in o["events"] if int(e[1]) <= deadline]
            counts.append(len(ev))
            events.extend(ev)
        events.sort(key=lambda e: e[1])
        overlaps = sum(1 for a, b in zip(events, events[1:]) if b[1] < a[2])
        waits = [(e[1] - e[0]) / 1e3 for e in events]
        holds = [(e[2] - e[1]) / 1e3 for e in events]
        return {"acq_per_s": len(events) / ((deadline - start) / 1e9), "jain": self.lib.jain(counts),
                "wait_p50_us": pct(waits, 0.5), "wait_p99_us": pct(waits, 0.99), "overlaps": overlaps,
                "errors": sum(int(o["errors"]) for o in outs), "acquisitions": len(events),
                "hold_mean_us": statistics.mean(holds) if holds else NAN}

    def finish(self, n):
        """The block's numbers and ratios for N = n."""
        from redlock import HOLD_US, W1, W2, W3
        lib, cur, put = self.lib, self.cur.get(n, {}), self.res.put
        key = lambda s: "%s/%d" % (s, n)
        w1 = {}
        for s in W1:
            paths, errors = cur.get(("w1", s), ([], 0))
            v = lib.read_samples(paths)
            if v:
                w1[s] = (lib.pct(v, 0.5), lib.pct(v, 0.99))
                put("red-w1", key(s), "p50_us", w1[s][0])
                put("red-w1", key(s), "p99_us", w1[s][1])
                put("red-w1", key(s), "errors", errors)
        f = w1.get("floor-pair", (NAN, NAN))
        for s, (p50, p99) in w1.items():
            if s == "floor-pair":
                continue
            for q, v, fl in (("p50", p50, f[0]), ("p99", p99, f[1])):
                put("red-w1", key(s), q + "_vs_floor", v / fl)
                put("red-w1", key(s), q + "_vs_n_floor", v / (n * fl))
                if s.startswith("dlock") and "node-redlock" in w1:
                    put("red-w1", key(s), q + "_vs_node", v / w1["node-redlock"][q == "p99"])
        floor = cur.get("c50_pairs", NAN)
        put("red-w2", key("floor"), "pairs_per_s", floor)
        rate = {}
        for s in W2:
            pairs, secs, errors, cpu = cur.get(("w2", s), (0, 0.0, 0, 0.0))
            if secs <= 0:
                continue
            rate[s] = pairs / secs
            for m, v in (("pairs_per_s", rate[s]), ("errors", errors), ("vs_floor", rate[s] / floor),
                         ("vs_n_floor", rate[s] / (floor / n)),
                         ("client_cpu_us_per_pair", cpu * 1e6 / pairs if pairs else NAN)):
                put("red-w2", key(s), m, v)
        if rate.get("node-redlock"):
            put("red-w2", key("dlock-red-async"), "vs_node", rate.get("dlock-red-async", NAN) / rate["node-redlock"])
        w3 = {s: cur[("w3", s)] for s in W3 if ("w3", s) in cur}
        r1 = w3.get("floor-w3", {}).get("acq_per_s", NAN)
        serial = 1.0 / (HOLD_US / 1e6 + n * max(0.0, 1.0 / r1 - HOLD_US / 1e6)) if r1 > 0 else NAN
        for s, st in w3.items():
            for m, v in st.items():
                put("red-w3", key(s), m, v)
            if s != "floor-w3":
                put("red-w3", key(s), "vs_floor", st["acq_per_s"] / r1)
                put("red-w3", key(s), "vs_n_floor", st["acq_per_s"] / serial)
        node = max((st["acq_per_s"] for s, st in w3.items() if s.startswith("node")), default=0)
        if node > 0:  # the better of node-redlock's retry settings in this block
            put("red-w3", key("dlock-red"), "vs_node", w3.get("dlock-red", {}).get("acq_per_s", NAN) / node)

    # ---- checks --------------------------------------------------------------------------------

    def wants(self):
        """(workload, system, metric) that must be positive numbers after a run."""
        from redlock import NS, W1, W2, W3
        out = []
        for n in NS:
            k = lambda s: "%s/%d" % (s, n)
            out += [("red-w1", k(s), m) for s in W1 for m in ("p50_us", "p99_us")]
            out += [("red-w1", k(s), "p50_vs_node") for s in ("dlock-red-sync", "dlock-red-async")]
            out += [("red-w2", k(s), "pairs_per_s") for s in W2 + ("floor",)]
            out += [("red-w2", k("dlock-red-async"), "vs_node")]
            out += [("red-w3", k(s), m) for s in W3[:3] for m in ("acq_per_s", "jain")]
            out += [("red-w3", k("dlock-red"), "vs_node")]
        if self.runner.node_env is None:
            out = [w for w in out if "node" not in w[1] and "vs_node" not in w[2]]
        return out

    def missing(self):
        out = []
        for w, s, m in self.wants():
            vals = self.res.get(w, s, m)
            if not vals or not all(self.lib.finite(v) and v > 0 for v in vals):
                out.append("%s %s: %s is %s" % (w, s, m, vals or "missing"))
        return out

    def problems(self):
        """Errors, and two holders of one red_lock at once: must be 0."""
        out = []
        for w, ms in (("red-w1", ("errors",)), ("red-w2", ("errors",)), ("red-w3", ("errors", "overlaps"))):
            for s, metrics in self.res.data.get(w, {}).items():
                for m in ms:
                    if any(v != 0 for v in metrics.get(m, [])):
                        out.append("%s %s: %s is not 0 (%s)" % (w, s, m, metrics[m]))
        return out

    # ---- the report ----------------------------------------------------------------------------

    def versions(self):
        v = {"redis": self.servers.r(0).info("server").get("redis_version", "?")}
        if self.runner.node_env is not None:
            v["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
            for pkg in ("redlock", "ioredis"):
                try:
                    with open(os.path.join(self.runner.a.node_modules, pkg, "package.json")) as f:
                        v[pkg] = json.load(f)["version"]
                except (OSError, ValueError, KeyError):
                    v[pkg] = "?"
        return v

    def verdicts(self, w, s, m, better):
        """'N=3 x; N=5 y' cells and one verdict: met when every N's median is on the right side of 1."""
        from redlock import NS
        lib, cells, ok = self.lib, [], []
        for n in NS:
            k = "%s/%d" % (s, n)
            cells.append("N=%d %s" % (n, lib.cell(self.res, w, k, m, 3, "×")))
            med = self.res.med(w, k, m)
            ok.append(lib.finite(med) and (med < 1 if better == "<" else med > 1))
        have = any(lib.finite(self.res.med(w, "%s/%d" % (s, n), m)) for n in NS)
        return "; ".join(cells), ("**met**" if all(ok) else "**missed**") if have else "—"

    def target_rows(self, row, append):
        """dlock ÷ node-redlock, the issue's goal (dlock ahead on every measure)."""
        from redlock import PROCS
        for label, w, s, m, better in (
                ("latency: dlock sync p50 ÷ node-redlock p50", "red-w1", "dlock-red-sync", "p50_vs_node", "<"),
                ("latency: dlock async p50 ÷ node-redlock p50", "red-w1", "dlock-red-async", "p50_vs_node", "<"),
                ("latency: dlock async p99 ÷ node-redlock p99", "red-w1", "dlock-red-async", "p99_vs_node", "<"),
                ("50 names, 1 process: dlock pairs/s ÷ node-redlock's", "red-w2", "dlock-red-async", "vs_node", ">"),
                ("one name, %d processes: dlock acquisitions/s ÷ node-redlock's (its better retry setting)" %
                 PROCS, "red-w3",
                 "dlock-red", "vs_node", ">")):
            cells, verdict = self.verdicts(w, s, m, better)
            append("| red_lock | %s | %s | %s 1 | %s |" % (label, cells, better, verdict))

    def table(self, add, w, systems, columns):
        """One row per N and system; columns: (header, metric, digits, unit)."""
        from redlock import NS
        add("| N | system | %s |" % " | ".join(c[0] for c in columns))
        add("|---|---|%s" % ("---|" * len(columns)))
        for n in NS:
            for s in systems:
                k = "%s/%d" % (s, n)
                add("| %d | %s | %s |" % (n, s, " | ".join(self.lib.cell(self.res, w, k, m, d, u)
                                                           for _, m, d, u in columns)))
        add("")

    def section(self, add, size=None):
        from redlock import HOLD_US, NODE_RETRY, NS, PROCS, THINK_US, W1, W2, W3
        sz, x = self.size, "×"
        add("## red_lock — one name on N independent servers, against node-redlock")
        add("")
        add("`dlock::red_lock` (a majority of N redis-servers, Redis' Redlock) and node-redlock (`redlock@4` on "
            "`ioredis`, `new Redlock([c1, ..., cN])`: quorum mode) over N = %s local redis-servers of "
            "`bench/redlock.py`'s own (`--save '' --appendonly no`), the same servers for both, every system of a "
            "measure interleaved within each repetition and each N. Baselines from the same block: one server's "
            "floor (on server 1). A red_lock asks its N servers at once, so **1 × floor** is the ideal and **N × "
            "floor** (N servers asked one after the other) the pessimistic bound; ratios to both. dlock ÷ "
            "node-redlock below 1 (latency) or above 1 (throughput) puts dlock ahead. What each side does per "
            "acquisition differs: dlock's red_lock writes the quorum's fencing token back to the servers that took "
            "it before it completes (a second round trip; node-redlock has no fencing token), and each of its N "
            "`dlock::client`s has an I/O thread of its own, where node-redlock runs on one event loop. All of it "
            "shares this host's CPUs with the N servers." % " and ".join(map(str, NS)))
        add("")
        add("**Latency** — one process, one lock+unlock pair after the other on one name (%d pairs per system, N "
            "and repetition, in %d chunk%s): floor-pair is `bench/floor_pair.cpp` (the mutex's two scripts over "
            "hiredis, one server); dlock sync `red_lock::lock()`/`unlock()`; dlock async `async_lock` then "
            "`multi_lease::async_unlock`, chained; node-redlock `lock(name, 30000)` then `unlock()` (no retry). "
            "dlock takes the watchdog lease (30 s, renewed)." % (sz["w1_n"], sz["w1_chunks"],
                                                                  "" if sz["w1_chunks"] == 1 else "s"))
        add("")
        self.table(add, "red-w1", W1, [("p50, µs", "p50_us", 0, ""), ("p99, µs", "p99_us", 0, ""),
                                       ("p50 ÷ floor", "p50_vs_floor", 3, x), ("p50 ÷ N × floor", "p50_vs_n_floor", 3, x),
                                       ("p99 ÷ N × floor", "p99_vs_n_floor", 3, x), ("p50 ÷ node", "p50_vs_node", 3, x),
                                       ("p99 ÷ node", "p99_vs_node", 3, x)])
        add("**Many names** — one process, 50 async lockers, each a lock+unlock loop on a name of its own (%.1f s "
            "per system, N and repetition). Floor F: `redis-benchmark -c 50 -P 1` of the mutex's acquire and "
            "release scripts on one server, a pair costing the sum (as in W2); a red_lock pair costs a pair on "
            "each of the N servers, so F is the ideal (N hosts) and F/N the bound of N servers' work done one "
            "after the other (as on this host's shared CPUs). node-redlock: 50 async loops, no retry." % sz["w2_s"])
        add("")
        self.table(add, "red-w2", ("floor",) + W2, [
            ("pairs/s", "pairs_per_s", 0, ""), ("÷ F", "vs_floor", 3, x), ("÷ F/N", "vs_n_floor", 3, x),
            ("÷ node", "vs_node", 3, x), ("client CPU per pair, µs", "client_cpu_us_per_pair", 0, ""),
            ("errors", "errors", 0, "")])
        retry = lambda s: "`retryDelay: %d, retryJitter: %d`" % NODE_RETRY[s]
        add("**One name** — %d processes on one name, each: wait for the lock, hold %d µs, unlock, think %d µs "
            "(W3's cycle; %.1f s per system, N and repetition). floor-w3 is `bench/floor_w3.cpp` on one server (the "
            "mutex's scripts and waiter protocol: a release wakes the next waiter). dlock: "
            "`red_lock::try_lock_for`: a round that finds the name held listens for the unlock of the first server "
            "found holding it and starts the next round when it comes (else after a jittered 5-100 ms pause). "
            "node-redlock polls, without limit: node-redlock %s (W3's setting, about the hold "
            "time: 0–1 ms between attempts), node-redlock-default %s (redlock@4's defaults: 100–299 ms; full runs "
            "only). A sweep from 1 to 200 ms on this host found no setting clearly better than both "
            "(docs/bench/journal.md); dlock ÷ node takes the better of the two in each block. The N × floor bound: "
            "1 / (hold + N·(1/r1 − hold)), r1 floor-w3's rate. Scripts per acquisition: EVALSHA and EVAL calls on "
            "the N servers during the run (floor-w3: its one server) ÷ acquisitions; an uncontended acquisition and "
            "release cost dlock 3 scripts per server, 3N (attempt, token floor, release), and node-redlock 2N; failed attempts "
            "and their clean-up the rest." % (PROCS, HOLD_US, THINK_US, sz["w3_s"],
                                                                  retry("node-redlock"), retry("node-redlock-default")))
        add("")
        self.table(add, "red-w3", W3, [
            ("acquisitions/s", "acq_per_s", 0, ""), ("÷ floor-w3", "vs_floor", 3, x),
            ("÷ N × floor bound", "vs_n_floor", 3, x), ("÷ best node", "vs_node", 3, x), ("Jain", "jain", 3, ""),
            ("wait p50, µs", "wait_p50_us", 0, ""), ("wait p99, µs", "wait_p99_us", 0, ""),
            ("scripts per acquisition", "scripts_per_acq", 1, ""), ("overlaps", "overlaps", 0, ""),
            ("errors", "errors", 0, "")])

    def standalone_report(self, elapsed, reps, versions):
        lib, L = self.lib, []
        m = lib.machine()
        L.append("# red_lock against node-redlock (bench/redlock.py)")
        L.append("")
        L.append("Generated by `bench/redlock.py%s` in %.0f s (%d repetition%s; each cell the median over repetitions "
                 "with the min–max spread)." % (" --quick" if self.runner.a.quick else "", elapsed, reps,
                                                 "" if reps == 1 else "s"))
        L.append("")
        for e in self.res.errors:
            L.append("- step failed: `%s`" % e.replace("`", "'")[:300])
        L.append("| | |")
        L.append("|---|---|")
        L.append("| CPU | %s (nproc %s), virtual machine: %s |" % (m.get("cpu"), m.get("nproc"), m.get("hypervisor")))
        for k, v in versions.items():
            L.append("| %s | %s |" % (k, v))
        L.append("| 1-min load average at each repetition's start, and at the end | %s |" % " → ".join(
            "%.2f" % x[0] for x in self.runner.load_avgs))
        L.append("")
        rows = []
        self.target_rows(None, rows.append)
        L.append("| | measure | dlock | target | |")
        L.append("|---|---|---|---|---|")
        L.extend(rows)
        L.append("")
        self.section(L.append)
        return "\n".join(L) + "\n"
