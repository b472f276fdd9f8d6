"""bench/semaphores.py — dlock::leased_semaphore in the sitting (issue 26, item 6): what run.py's
Runner needs to run it beside dlock::mutex, in the same repetitions, and the report's rows and
section. The permits drive `dlock_load w1|w2 --kind permits`; the CLI's overhead drives `dlock exec`.

- W1 (system dlock-permits): one client, `acquire(1)` + `permit::release` on a semaphore of one
  permit, in W1's rotation; its p50 is taken over the floor pair's and the mutex's (dlock-sync) of
  the same repetition.
- W2 in W2's 1×50 rotation: 50 async acquirers of one process, each on a semaphore of 1 permit of
  its own (dlock-permits: the analogue of the mutex's 50 distinct names — every acquisition
  uncontended, the same number of names, each as small), and all 50 on one semaphore of 50 permits
  (dlock-permits-shared: the semaphore as it is used, one hot counter and one 50-member timeout
  set; reported). Pairs/s over the `-c 50 -P 1` floor and over the mutex's 1×50 async pairs/s.
- `dlock exec --permits 3 NAME -- true` against `dlock exec NAME -- true`, alternating, wall time
  of each process (only when the built CLI has --permits).

No peer of the bench offers a semaphore with leased permits, so there is no peer column.
"""
import json
import os
import shutil
import statistics
import subprocess
import time

W1 = ("dlock-permits",)
W2 = ("dlock-permits", "dlock-permits-shared")
EXEC_RUNS = {"quick": 10, "full": 60}  # of each form, per repetition


class SemaphoreBench:
    """lib: run.py's module (cell, fmt, pct, read_samples, SCRIPT_INTERNAL); passed in, not
    imported, since run.py runs as __main__."""

    def __init__(self, runner, lib):
        self.runner, self.lib, self.res = runner, lib, runner.res
        self.cli = os.path.join(os.path.dirname(os.path.abspath(runner.a.bin)), "tools", "dlock", "dlock")
        self.exec_skip = self.exec_why_not()
        if not self.exec_skip:  # a copy: a build relinking the CLI during the sitting cannot touch it
            self.cli = shutil.copy2(self.cli, os.path.join(runner.a.work, "dlock"))

    def exec_why_not(self):
        """Why the exec overhead cannot be measured ('' when it can)."""
        if not os.access(self.cli, os.X_OK):
            return "no dlock CLI at %s" % self.cli
        out = subprocess.run([self.cli, "exec", "--help"], capture_output=True, text=True).stdout
        return "" if "--permits" in out else "the built dlock CLI has no `exec --permits`"

    # ---- the runs ------------------------------------------------------------------------------

    def w1_systems(self):
        return list(W1)

    def w2_systems(self, procs):
        return list(W2) if procs == 1 else []

    def w1(self, system, rep, chunk):
        run, size = self.runner, self.runner.size
        n = str(max(100, size["w1_n"] // size["w1_chunks"]))
        out = json.loads(run.run_json(
            [run.bin("dlock_load"), "w1", "--kind", "permits", "--url", run.url,
             "--name", "bench:w1:permits:r%d:c%d" % (rep, chunk), "--iterations", n,
             "--warmup", str(size["w1_warmup"]), "--samples", run.sample_file(system, rep, chunk)], 300))
        run.cur.setdefault("permits-w1-errors", {}).setdefault(system, 0)
        run.cur["permits-w1-errors"][system] += out["errors"]

    def w2(self, system, rep, chunk):
        """One chunk of W2: the pairs go where the mutex's do (run.py's w2_finish takes them over
        the floor); the scripts run, the commands inside them and the server's CPU beside."""
        run, size = self.runner, self.runner.size
        seconds = size["w2_s"] / size["w2_chunks"]
        where = "bench:w2:%s:r%d:c%d" % (system, rep, chunk)
        cmd = [run.bin("dlock_load"), "w2", "--kind", "permits", "--url", run.url, "--lockers", "50",
               "--name" if system.endswith("shared") else "--prefix", where,
               "--seconds", str(seconds), "--start-at", str(run.start_at())]
        stats0, cpu0 = run.commandstats(), run.family.server_cpu_s()
        out = run.run_group([cmd], seconds + 60)[0]
        stats1, cpu1 = run.commandstats(), run.family.server_cpu_s()
        delta = lambda c: stats1.get(c, {}).get("calls", 0) - stats0.get(c, {}).get("calls", 0)
        inside = sum(delta(c) for c in stats1 if c in self.lib.SCRIPT_INTERNAL["dlock"])
        acc = run.cur.setdefault("w2", {}).setdefault((system, 1), [0, 0.0, 0])
        acc[0] += out["pairs"]
        acc[1] += out["seconds"]
        acc[2] += out["errors"]
        side = run.cur.setdefault("permits-w2", {}).setdefault(system, [0, 0, 0.0])
        for i, x in enumerate((delta("evalsha"), inside, cpu1 - cpu0)):
            side[i] += x

    def exec_overhead(self, rep):
        """`dlock exec NAME -- true` and `dlock exec --permits 3 NAME -- true`, alternating, each
        timed from spawn to exit."""
        if self.exec_skip:
            return
        run = self.runner
        n = EXEC_RUNS["quick" if run.a.quick else "full"]
        forms = {"exec": ["bench:exec:lock:r%d" % rep], "exec-permits": ["--permits", "3", "bench:exec:sem:r%d" % rep]}
        ms = {k: [] for k in forms}
        for i in range(2 * n):
            k = ("exec", "exec-permits")[(i + rep) % 2]
            t0 = time.monotonic()
            subprocess.run([self.cli, "--url", run.url, "exec"] + forms[k] + ["--", "true"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
            ms[k].append((time.monotonic() - t0) * 1e3)
        p50 = {k: statistics.median(v) for k, v in ms.items()}
        for k, v in ms.items():
            self.res.put("permits-exec", k, "p50_ms", p50[k])
            self.res.put("permits-exec", k, "p90_ms", self.lib.pct(v, 0.9))
        self.res.put("permits-exec", "exec-permits", "extra_ms", p50["exec-permits"] - p50["exec"])
        self.res.put("permits-exec", "exec-permits", "vs_exec", p50["exec-permits"] / p50["exec"])

    def finish(self, rep):
        """The repetition's ratios over the mutex's: W1 p50 over dlock-sync's, W2 1×50 pairs/s
        over dlock-async's on distinct names; and W2's per-pair costs."""
        run, put, lib = self.runner, self.res.put, self.lib
        p50 = lambda s: lib.pct(lib.read_samples(run.rep_samples.get(s, [])) or [float("nan")], 0.5)
        for s in W1:
            put("w1", s, "p50_vs_mutex", p50(s) / p50("dlock-sync"))
            put("w1", s, "errors", run.cur.get("permits-w1-errors", {}).get(s, float("nan")))
        w2 = run.cur.get("w2", {})
        rate = lambda s: w2[(s, 1)][0] / w2[(s, 1)][1] if (s, 1) in w2 and w2[(s, 1)][1] > 0 else float("nan")
        for s, (scripts, inside, cpu) in run.cur.get("permits-w2", {}).items():
            pairs = w2[(s, 1)][0]
            put("w2", s, "1x50_vs_mutex", rate(s) / rate("dlock-async"))
            put("permits-w2", s, "scripts_per_pair", scripts / pairs if pairs else float("nan"))
            put("permits-w2", s, "script_commands_per_pair", inside / pairs if pairs else float("nan"))
            put("permits-w2", s, "server_us_per_pair", cpu * 1e6 / pairs if pairs else float("nan"))

    # ---- the --quick check ---------------------------------------------------------------------

    def wants(self):
        """(workload, system, metric) that must be positive numbers after a run."""
        out = [("w1", s, m) for s in W1 for m in ("p50_us", "p99_us", "p50_vs_floor", "p50_vs_mutex")]
        out += [("w2", s, m) for s in W2 for m in ("1x50_pairs_per_s", "1x50_vs_floor", "1x50_vs_mutex")]
        if not self.exec_skip:
            out += [("permits-exec", s, "p50_ms") for s in ("exec", "exec-permits")]
        return out

    def problems(self):
        out = []
        for w, s, m in [("w1", s, "errors") for s in W1] + [("w2", s, "1x50_errors") for s in W2]:
            vals = self.res.get(w, s, m)
            if vals and any(v != 0 for v in vals):
                out.append("%s %s: %s is not 0 (%s)" % (w, s, m, vals))
        return out

    # ---- the report ----------------------------------------------------------------------------

    def target_rows(self, row, append):
        """The mutex's W1 sync and W2 1×50 targets, applied to the permits (no target of their own)."""
        cell = self.lib.cell
        row("W1 permits", "leased_semaphore `acquire(1)` + `release` p50 ÷ floor pair p50 (the mutex's target)",
            "w1", "dlock-permits", "p50_vs_floor", "≤ 1.30", lambda x: x <= 1.30, digits=3, unit="×")
        row("W2 permits", "1×50 async, a semaphore of 1 permit each, pairs/s ÷ `-c 50 -P 1` floor (the mutex's "
            "target)", "w2", "dlock-permits", "1x50_vs_floor", "≥ 1.5", lambda x: x >= 1.5, digits=3, unit="×")
        append("| W1/W2 permits | ÷ the mutex's, same repetition: W1 p50 (sync); W2 1×50 async pairs/s | %s; %s "
               "| reported | — |" % (cell(self.res, "w1", "dlock-permits", "p50_vs_mutex", 3, "×"),
                                    cell(self.res, "w2", "dlock-permits", "1x50_vs_mutex", 3, "×")))
        if not self.exec_skip:
            append("| exec permits | `dlock exec --permits 3` − `dlock exec`, p50 wall time per run | %s | reported | — |"
                   % cell(self.res, "permits-exec", "exec-permits", "extra_ms", 1, " ms"))

    def section(self, add, size):
        res, cell = self.res, self.lib.cell
        add("## leased_semaphore (permits)")
        add("")
        add("`dlock::leased_semaphore` (Redisson's RPermitExpirableSemaphore layout) in the mutex's W1 and W2, in "
            "the same repetitions and rotations, driven by `dlock_load w1|w2 --kind permits`. Every acquisition "
            "takes one permit without a lease (watchdog-renewed, as the mutex's); the permits are set before the "
            "clock starts. The floor is the mutex's (its two scripts over hiredis, and `-c 50 -P 1` of them): "
            "there is no separate semaphore floor, so the ratios include whatever the semaphore's scripts cost "
            "beyond the mutex's. No peer measured here offers a semaphore with leased permits.")
        add("")
        add("| measure | permits | mutex |")
        add("|---|---|---|")
        for m, label, d, unit in (("p50_vs_floor", "W1 p50 ÷ floor pair p50", 3, "×"),
                                  ("p99_vs_floor", "W1 p99 ÷ floor pair p99", 2, "×"),
                                  ("p50_us", "W1 p50, µs", 0, ""), ("p99_us", "W1 p99, µs", 0, "")):
            add("| %s | %s | %s |" % (label, cell(res, "w1", "dlock-permits", m, d, unit),
                                      cell(res, "w1", "dlock-sync", m, d, unit)))
        add("| W1 p50 ÷ the mutex's (sync), same repetition | %s | 1 |" % cell(res, "w1", "dlock-permits",
                                                                                "p50_vs_mutex", 3, "×"))
        add("")
        add("W1: one client, one thread, `acquire(1)` then `permit::release()` on a semaphore of 1 permit, "
            "one pair after the other (the mutex column is W1's dlock-sync, `lock()`/`unlock()`).")
        add("")
        add("| W2 1×50 async (%.1f s per repetition) | pairs/s | ÷ floor | ÷ mutex 1×50 async | scripts per pair "
            "| commands inside them per pair | server CPU per pair, µs | errors |" % size["w2_s"])
        add("|---|---|---|---|---|---|---|---|")
        for s, label in (("dlock-permits", "50 semaphores of 1 permit"), ("dlock-permits-shared", "one semaphore of 50 permits")):
            add("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label, cell(res, "w2", s, "1x50_pairs_per_s", 0), cell(res, "w2", s, "1x50_vs_floor", 3, "×"),
                cell(res, "w2", s, "1x50_vs_mutex", 3, "×"), cell(res, "permits-w2", s, "scripts_per_pair", 1),
                cell(res, "permits-w2", s, "script_commands_per_pair", 1),
                cell(res, "permits-w2", s, "server_us_per_pair", 1), cell(res, "w2", s, "1x50_errors", 0)))
        add("| mutex, 50 names (dlock-async) | %s | %s | 1 | — | — | — | %s |" % (
            cell(res, "w2", "dlock-async", "1x50_pairs_per_s", 0), cell(res, "w2", "dlock-async", "1x50_vs_floor", 3, "×"),
            cell(res, "w2", "dlock-async", "1x50_errors", 0)))
        add("")
        add("W2: one process, one client, 50 chains of `async_acquire(1)`/`async_release`. The target row is the "
            "50 semaphores of 1 permit each: like the mutex's 50 distinct names, every acquisition is "
            "uncontended and every name as small, so the ratio to the mutex is the cost of the scripts. One "
            "semaphore of 50 permits (also never short of a permit) is the semaphore as used: one hot counter, "
            "one timeout set of up to 50 members, one channel.")
        add("")
        if self.exec_skip:
            add("`dlock exec --permits` overhead: not measured (%s)." % self.exec_skip)
        else:
            add("**`dlock exec --permits 3 NAME -- true` against `dlock exec NAME -- true`**: %d runs of each per "
                "repetition, alternating, each timed from spawn to exit (connect, acquire, fork+exec `true`, "
                "release, exit)." % EXEC_RUNS["quick" if self.runner.a.quick else "full"])
            add("")
            add("| measure | `dlock exec` | `dlock exec --permits 3` |")
            add("|---|---|---|")
            for m, label in (("p50_ms", "p50 per run, ms"), ("p90_ms", "p90 per run, ms")):
                add("| %s | %s | %s |" % (label, cell(res, "permits-exec", "exec", m, 1),
                                          cell(res, "permits-exec", "exec-permits", m, 1)))
            add("| p50 − `dlock exec`'s, ms; ÷ it | — | %s; %s |" % (
                cell(res, "permits-exec", "exec-permits", "extra_ms", 1),
                cell(res, "permits-exec", "exec-permits", "vs_exec", 3, "×")))
        add("")
