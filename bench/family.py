"""bench/family.py — dlock::fair_mutex and dlock::shared_mutex in the sitting (issue 25, item 5):
what run.py's Runner needs to run them beside dlock::mutex, in the same repetitions, and the
report's rows and section. All of it drives `dlock_load --kind fair|read|write`.

- W3 with fair_mutex (system dlock-fair): run.py's W3, right after the mutex and its floor;
  its rate is taken over the mutex's of the same repetition.
- W2 with shared_mutex: 50 async lockers of one process on one name, 45 on the read side and 5
  on the write side (dlock-rw), and 50 readers alone (dlock-rw-readers), in W2's 1×50 rotation;
  their read pairs/s are taken over the mutex's W2 1×50 async pairs/s (distinct names) of the
  same repetition.
- W6 with fair_mutex and with each side of shared_mutex (dlock-fair, dlock-read, dlock-write).

No peer of the bench offers these kinds (see section()), so they have no peer column.
"""
import json

W2 = ("dlock-rw", "dlock-rw-readers")
WRITERS = {"dlock-rw": 5, "dlock-rw-readers": 0}  # of 50 lockers
W3 = "dlock-fair"
W6 = ("fair", "read", "write")
LABEL = {"dlock-rw": "shared_mutex, 45 readers + 5 writers", "dlock-rw-readers": "shared_mutex, 50 readers",
         "dlock-fair": "fair_mutex", "dlock-read": "shared_mutex read holds",
         "dlock-write": "shared_mutex write holds"}


class FamilyBench:
    """lib: run.py's module (its helpers cell, fmt, SCRIPT_INTERNAL); passed in, not imported,
    since run.py runs as __main__."""

    def __init__(self, runner, lib):
        self.runner, self.lib, self.res = runner, lib, runner.res
        lib.SCRIPT_INTERNAL[W3] = lib.SCRIPT_INTERNAL["dlock"]

    # ---- the runs ------------------------------------------------------------------------------

    def w2_systems(self, procs):
        return list(W2) if procs == 1 else []

    def w3_systems(self):
        return [W3]

    def w2(self, system, rep, chunk):
        """One chunk of W2 for a shared_mutex system: one process, 50 async lockers on one name.
        Also counts what Redis did for it: the commands its scripts ran and its CPU."""
        run, size = self.runner, self.runner.size
        seconds = size["w2_s"] / size["w2_chunks"]
        cmd = [run.bin("dlock_load"), "w2", "--url", run.url, "--lockers", "50", "--mode", "async",
               "--kind", "read", "--writers", str(WRITERS[system]),
               "--name", "bench:w2:%s:r%d:c%d" % (system, rep, chunk),
               "--seconds", str(seconds), "--start-at", str(run.start_at())]
        stats0, cpu0 = run.commandstats(), self.server_cpu_s()
        out = run.run_group([cmd], seconds + 60)[0]
        stats1, cpu1 = run.commandstats(), self.server_cpu_s()
        inside = sum(v["calls"] - stats0.get(c, {}).get("calls", 0) for c, v in stats1.items()
                     if c in self.lib.SCRIPT_INTERNAL["dlock"])
        scripts = stats1.get("evalsha", {}).get("calls", 0) - stats0.get("evalsha", {}).get("calls", 0)
        acc = run.cur.setdefault("family-w2", {}).setdefault(system, [0] * 7)
        for i, x in enumerate((out["pairs"], out["write_pairs"], out["seconds"], out["errors"], scripts, inside,
                               cpu1 - cpu0)):
            acc[i] += x

    def server_cpu_s(self):
        c = self.runner.r.info("cpu")
        return float(c["used_cpu_user"]) + float(c["used_cpu_sys"])

    def finish(self, rep):
        """The repetition's ratios: fair_mutex's W3 rate over the mutex's, and shared_mutex's
        read pairs/s over the mutex's W2 1×50 async pairs/s."""
        put = self.res.put
        w3 = self.runner.cur.get("w3_acq_per_s", {})
        if w3.get("dlock") and W3 in w3:
            put("w3", W3, "acq_vs_mutex", w3[W3] / w3["dlock"])
        mutex = self.runner.cur.get("w2", {}).get(("dlock-async", 1))
        mutex_rate = mutex[0] / mutex[1] if mutex and mutex[1] > 0 else float("nan")
        for s, (pairs, writes, secs, errors, scripts, inside, cpu) in self.runner.cur.get("family-w2", {}).items():
            reads = pairs - writes
            put("family-w2", s, "read_pairs_per_s", reads / secs)
            put("family-w2", s, "write_pairs_per_s", writes / secs)
            put("family-w2", s, "read_vs_mutex", reads / secs / mutex_rate)
            put("family-w2", s, "errors", errors)
            put("family-w2", s, "scripts_per_pair", scripts / pairs if pairs else float("nan"))
            put("family-w2", s, "script_commands_per_pair", inside / pairs if pairs else float("nan"))
            put("family-w2", s, "server_us_per_pair", cpu * 1e6 / pairs if pairs else float("nan"))

    def w6(self, rep):
        """W6 (Redis memory per held lock) with one fair_mutex, read or write hold per name."""
        run = self.runner
        for kind in W6:
            run.flush()
            out = json.loads(run.run_json(
                [run.bin("dlock_load"), "w6", "--url", run.url, "--kind", kind, "--locks", str(run.size["w6_locks"]),
                 "--prefix", "bench:w6:r%d" % rep], 300))
            run.flush()
            for k in ("bytes_per_lock", "keys_per_lock", "bytes_left_per_released_lock",
                      "keys_left_per_released_lock", "acquire_failed", "release_failed"):
                self.res.put("w6", "dlock-" + kind, k, out[k])

    # ---- the --quick check ---------------------------------------------------------------------

    def wants(self):
        """(workload, system, metric) that must be positive numbers after a run."""
        out = [("w3", W3, m) for m in ("acq_per_s", "jain", "handoff_p50_rtt", "acq_vs_mutex")]
        out += [("family-w2", s, m) for s in W2 for m in ("read_pairs_per_s", "read_vs_mutex")]
        out += [("family-w2", "dlock-rw", "write_pairs_per_s")]
        out += [("w6", "dlock-" + k, "bytes_per_lock") for k in W6]
        return out

    def problems(self):
        """Errors and broken exclusion, which must be 0."""
        out = []
        for w, s, m in [("w3", W3, "overlaps"), ("w3", W3, "errors")] + [("family-w2", s, "errors") for s in W2] + \
                [("w6", "dlock-" + k, m) for k in W6 for m in ("acquire_failed", "release_failed")]:
            vals = self.res.get(w, s, m)
            if vals and any(v != 0 for v in vals):
                out.append("%s %s: %s is not 0 (%s)" % (w, s, m, vals))
        return out

    # ---- the report ----------------------------------------------------------------------------

    def target_rows(self, row, append):
        cell = self.lib.cell
        ge = lambda t: (lambda x: x >= t)
        row("W3 fair", "fair_mutex acquisitions/s ÷ the mutex's, same repetition", "w3", W3, "acq_vs_mutex",
            "≥ 0.95", ge(0.95), digits=3, unit="×")
        row("W3 fair", "fair_mutex Jain fairness of per-process acquisitions", "w3", W3, "jain", "≥ 0.99",
            ge(0.99), digits=3)
        row("W3 fair", "fair_mutex hand-off p50 in RTTs", "w3", W3, "handoff_p50_rtt", "≤ 3",
            lambda x: x <= 3.0, digits=3)
        row("W2 shared", "shared_mutex, 45 readers + 5 writers on one name (1×50 async): read pairs/s ÷ the "
            "mutex's 1×50 async pairs/s on distinct names", "family-w2", "dlock-rw", "read_vs_mutex", "≥ 0.9",
            ge(0.9), digits=3, unit="×")
        append("| W2 shared | same with 50 readers, no writer | %s | reported | — |" %
               cell(self.res, "family-w2", "dlock-rw-readers", "read_vs_mutex", 3, "×"))
        append("| W6 | Redis memory per held lock: fair_mutex; shared_mutex read hold; write hold | %s | reported | — |"
               % "; ".join(cell(self.res, "w6", "dlock-" + k, "bytes_per_lock", 0, " B") for k in W6))

    def section(self, add, size):
        res, cell = self.res, self.lib.cell
        add("## fair_mutex and shared_mutex")
        add("")
        add("`dlock::fair_mutex` (Redisson's RFairLock layout) and `dlock::shared_mutex` (RReadWriteLock's) "
            "in the mutex's workloads, in the same repetitions, driven by `dlock_load --kind fair|read|write`. "
            "There is no peer column: neither peer measured here has these kinds (redis-py's `Lock` and "
            "node-redlock are exclusive and unordered), and no C++ Redis library we know of offers a fair or a "
            "read-write lock on Redisson's layouts; Redisson itself is Java, which this bench does not run.")
        add("")
        add("**W3 with fair_mutex** (the row dlock-fair of W3's table above): the same 8 processes, hold and "
            "think, run right after the mutex and its floor; the rate is taken over the mutex's of the same "
            "repetition.")
        add("")
        add("| measure | fair_mutex | mutex (W3's dlock) |")
        add("|---|---|---|")
        for m, label, d, unit in (("acq_per_s", "acquisitions/s", 0, ""), ("acq_vs_mutex", "÷ the mutex's (target ≥ 0.95)", 3, "×"),
                                  ("jain", "Jain (target ≥ 0.99)", 3, ""),
                                  ("handoff_p50_rtt", "hand-off p50, RTTs (target ≤ 3)", 2, ""),
                                  ("handoff_p50_us", "hand-off p50, µs", 0, ""), ("handoff_p99_rtt", "hand-off p99, RTTs", 1, ""),
                                  ("wait_p99_us", "wait p99, µs", 0, ""), ("commands_per_acq", "commands sent per acquisition", 1, ""),
                                  ("overlaps", "overlaps", 0, "")):
            add("| %s | %s | %s |" % (label, cell(res, "w3", W3, m, d, unit),
                                      "—" if m == "acq_vs_mutex" else cell(res, "w3", "dlock", m, d, unit)))
        add("")
        add("**W2 with shared_mutex**: one process, one client, 50 chains of `async_lock`/`async_unlock` "
            "(each acquisition a lease of its own, so every reader is an owner of its own) on **one** name, "
            "in the 1×50 rotation of W2 (%.1f s per repetition, in %d chunk%s); 45 take the read side and 5 "
            "the write side, and once more with 50 readers and no writer. The ratio is the read pairs/s over "
            "the mutex's 1×50 async pairs/s on 50 distinct names in the same repetition: readers that share "
            "the lock should cost about what uncontended mutexes do. Scripts run (EVALSHA: attempts, "
            "releases), the commands they ran inside Redis and the server's CPU (`INFO` deltas around the "
            "process) are per lock+unlock pair, reads and writes together. Why these rows are where they are: "
            "docs/bench/journal.md." % (size["w2_s"], size["w2_chunks"], "" if size["w2_chunks"] == 1 else "s"))
        add("")
        add("| system | read pairs/s | ÷ mutex 1×50 async | write pairs/s | scripts per pair "
            "| commands inside them per pair | server CPU per pair, µs | errors |")
        add("|---|---|---|---|---|---|---|---|")
        for s in W2:
            add("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                LABEL[s], cell(res, "family-w2", s, "read_pairs_per_s", 0),
                cell(res, "family-w2", s, "read_vs_mutex", 3, "×"), cell(res, "family-w2", s, "write_pairs_per_s", 0),
                cell(res, "family-w2", s, "scripts_per_pair", 1),
                cell(res, "family-w2", s, "script_commands_per_pair", 1), cell(res, "family-w2", s, "server_us_per_pair", 1),
                cell(res, "family-w2", s, "errors", 0)))
        add("| mutex, 50 lockers on distinct names | %s | 1 | — | — | — | %s | %s |" % (
            cell(res, "w2", "dlock-async", "1x50_pairs_per_s", 0), cell(res, "cluster-cpu", "dlock-async", "1x50_master_us", 1),
            cell(res, "w2", "dlock-async", "1x50_errors", 0)))
        add("")
        add("**W6 with fair_mutex and shared_mutex**: W6's %s names, one hold each (10-minute leases, fencing on), "
            "spread over 50 clients." % self.lib.fmt(res.med("w6", "dlock", "locks")))
        add("")
        add("| measure | mutex | %s |" % " | ".join(LABEL["dlock-" + k] for k in W6))
        add("|---|---|---|---|---|")
        for m, label, d in (("bytes_per_lock", "`used_memory` delta per held lock, bytes", 0),
                            ("keys_per_lock", "keys per held lock", 2),
                            ("bytes_left_per_released_lock", "bytes left per lock after all were released", 0),
                            ("keys_left_per_released_lock", "keys left per released lock", 2)):
            add("| %s | %s | %s |" % (label, cell(res, "w6", "dlock", m, d),
                                      " | ".join(cell(res, "w6", "dlock-" + k, m, d) for k in W6)))
        add("")
