"""Run a command and report the peak resident memory of its whole process tree.

`/usr/bin/time -v` reports the largest single process; a notebook run is several at once (the
nbclient driver, the kernel, the training subprocess the kernel starts), and Binder's ~2 GB
limit applies to their sum. So: sample the tree every 0.1 s with psutil and keep the largest sum
(and each process's own peak, to say which one dominates).

    python bench/peak_rss.py [--json OUT] -- COMMAND ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time

import psutil


def tree_rss(root: psutil.Process) -> dict[int, tuple[str, int]]:
    out = {}
    for p in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):  # ended meanwhile
            out[p.pid] = (" ".join(p.cmdline()[:4])[:120], p.memory_info().rss)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    parser.add_argument("--every", type=float, default=0.1, help="sampling interval in seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    start = time.monotonic()
    proc = subprocess.Popen(command)
    root = psutil.Process(proc.pid)
    peak_total, per_process = 0, {}
    while proc.poll() is None:
        sample = tree_rss(root)
        peak_total = max(peak_total, sum(rss for _, rss in sample.values()))
        for pid, (cmd, rss) in sample.items():
            if rss > per_process.get(pid, ("", 0))[1]:
                per_process[pid] = (cmd, rss)
        time.sleep(args.every)
    mib = 1024 * 1024
    result = {
        "command": command,
        "exit_code": proc.returncode,
        "wall_s": round(time.monotonic() - start, 1),
        "peak_tree_rss_mib": round(peak_total / mib),
        "processes": sorted(
            ({"cmd": cmd, "peak_rss_mib": round(rss / mib)} for cmd, rss in per_process.values()),
            key=lambda p: -p["peak_rss_mib"],
        )[:6],
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
