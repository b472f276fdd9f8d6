#!/usr/bin/python3
"""Draws the demo's timeline: one row per worker, a bar per critical section (the time its
`dlock exec` held the lock and ran the section), a lighter bar for its wait, and the master's
kill -9 and the sentinels' new master as lines.

    scripts/demo_timeline.py                      # runs the demo twice, writes docs/demo_timeline.png
    scripts/demo_timeline.py --from run.txt ...   # draws histories written by scripts/demo --history
    scripts/demo_timeline.py --out t.png --bin build/ci/tools/dlock/dlock --keep runs/

Without --from it runs `scripts/demo --sentinel --workers 4 --sections 12 --history ...` (a
Sentinel group on loopback, its master killed with kill -9 a quarter of the way) and the same
scene with `--no-lock` on a single server, and draws both, one panel each. --bin is passed to
the demo (default: build/ci/tools/dlock/dlock when it exists, else the demo builds one).
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_history(path):
    """Parses a --history file: the run, its sections, the kill, the switch, failed execs."""
    run = {"sections": [], "failed": [], "kill": None, "switch": None}
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                parse_line(run, line.split(), f"{path}:{number}")
    except OSError as e:
        sys.exit(f"demo_timeline: {e}")
    if "start" not in run:
        sys.exit(f"demo_timeline: {path} is not a scripts/demo --history file")
    return run


def parse_line(run, parts, where):
    try:
        if not parts:
            return
        if parts[0] != "#":
            worker, wait, enter, leave, token = (int(x) for x in parts[:5])
            run["sections"].append((worker, wait, enter, leave, token))
        elif parts[1] == "run":
            run.update(lock=parts[2] == "lock", workers=int(parts[3]), start=int(parts[5]),
                       end=int(parts[6]))
        elif parts[1] in ("kill", "switch"):
            run[parts[1]] = (int(parts[2]), parts[3])
        elif parts[1] == "failed":
            run["failed"].append((int(parts[2]), int(parts[3]), int(parts[4])))
    except (ValueError, IndexError):
        sys.exit(f"demo_timeline: {where}: not a line of a scripts/demo --history file")


def overlaps(sections):
    ordered = sorted(sections, key=lambda s: s[2])
    return sum(1 for a, b in zip(ordered, ordered[1:]) if b[2] < a[3])


def draw(ax, run, title):
    t0 = run["start"]
    sec = lambda ns: (ns - t0) / 1e9  # noqa: E731
    hold_colour = "#2b6cb0" if run["lock"] else "#c05621"
    for worker, wait, enter, leave, _ in run["sections"]:
        y = worker
        if run["lock"]:
            ax.barh(y, sec(enter) - sec(wait), left=sec(wait), height=0.5, color="#cbd5e0")
        ax.barh(y, sec(leave) - sec(enter), left=sec(enter), height=0.5, color=hold_colour,
                edgecolor="white", linewidth=0.3)
    for worker, start, code in run["failed"]:  # 70: the hold was lost; others: tried again
        lost = code == 70
        ax.plot(sec(start), worker, marker="x" if lost else "o", markersize=6 if lost else 4,
                color="#c53030" if lost else "#718096", mew=2 if lost else 1, lw=0)
    above = ax.get_xaxis_transform()  # x in data, y in axes: labels just above the panel
    if run["kill"]:
        ax.axvline(sec(run["kill"][0]), color="#c53030", lw=1.5)
        ax.text(sec(run["kill"][0]), 1.02, "kill -9 of the master", transform=above,
                color="#c53030", fontsize=8, ha="right", va="bottom")
    if run["switch"]:
        ax.axvline(sec(run["switch"][0]), color="#2f855a", lw=1.5, ls="--")
        ax.text(sec(run["switch"][0]), 1.02, "the sentinels name a new master", transform=above,
                color="#2f855a", fontsize=8, ha="left", va="bottom")
    n = run["workers"]
    ax.set_yticks(range(1, n + 1), [f"worker {w}" for w in range(1, n + 1)])
    ax.set_ylim(n + 0.6, 0.4)
    ax.set_xlim(0, sec(run["end"]))
    ax.grid(axis="x", color="#e2e8f0", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"{title}: {len(run['sections'])} sections, "
                 f"{overlaps(run['sections'])} overlapping", fontsize=10, loc="left",
                 pad=14 if run["kill"] else 6)


def run_demo(args, history, demo_args):
    cmd = [os.path.join(ROOT, "scripts", "demo"), "--history", history] + demo_args
    if args.bin:
        cmd += ["--bin", args.bin]
    print("demo_timeline: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=False, stdout=sys.stderr)  # --no-lock exits 1: still a picture
    if not os.path.exists(history):
        sys.exit("demo_timeline: the demo wrote no history")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--from", dest="sources", action="append", default=[],
                   help="a scripts/demo --history file (repeat for more panels)")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "demo_timeline.png"))
    p.add_argument("--bin", help="the dlock binary for the demo")
    p.add_argument("--keep", help="a directory to keep the demo runs' histories in")
    args = p.parse_args()
    default_bin = os.path.join(ROOT, "build", "ci", "tools", "dlock", "dlock")
    if args.bin is None and os.access(default_bin, os.X_OK):
        args.bin = default_bin

    panels = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            tmp = args.keep
        if args.sources:
            panels = [(read_history(s), os.path.basename(s)) for s in args.sources]
        else:
            scene = ["--workers", "4", "--sections", "12"]
            locked, unlocked = os.path.join(tmp, "lock.txt"), os.path.join(tmp, "no-lock.txt")
            run_demo(args, locked, scene + ["--sentinel"])
            run_demo(args, unlocked, scene + ["--no-lock"])
            panels = [(read_history(locked), "with dlock exec (Sentinel, master killed)"),
                      (read_history(unlocked), "--no-lock")]

    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.0 + 1.25 * len(panels) + 0.25 *
                                                       sum(r["workers"] for r, _ in panels)),
                             squeeze=False)
    for ax, (run, title) in zip(axes[:, 0], panels):
        draw(ax, run, title)
    axes[-1, 0].set_xlabel("seconds since the workers started")
    runs = [r for r, _ in panels]
    codes = {code for r in runs for _, _, code in r["failed"]}
    legend = [Patch(color="#cbd5e0", label="waiting in dlock exec")] * any(r["lock"] for r in runs)
    legend += [Patch(color="#2b6cb0", label="critical section, lock held")] * any(
        r["lock"] for r in runs)
    legend += [Patch(color="#c05621", label="critical section, no lock")] * any(
        not r["lock"] for r in runs)
    legend += [Line2D([], [], marker="x", color="#c53030", lw=0, mew=2,
                      label="exec exit 70: hold lost")] * (70 in codes)
    legend += [Line2D([], [], marker="o", color="#718096", lw=0,
                      label="exec failed, tried again")] * bool(codes - {70})
    fig.legend(handles=legend, loc="lower center", ncol=len(legend), fontsize=8, frameon=False)
    fig.suptitle("scripts/demo: read, +1, write one counter file from several processes",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(args.out, dpi=80)
    print(f"demo_timeline: wrote {args.out} ({os.path.getsize(args.out) // 1024} KB)")


if __name__ == "__main__":
    main()
