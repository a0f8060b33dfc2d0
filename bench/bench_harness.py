"""Harness index: `show` over 10,000 traces and `reindex` of 10,000 run directories.

Target (issue 4): `show` over 10,000 traces under 200 ms. Generates N run directories, each with
a realistic trace.json (the full resolved RL config of the starter, deps, hardware, data hashes,
metrics summary), in a temporary PRIME_HOME, then measures, each beside a baseline measured in
the same run:

* reindex (rebuild the index from the N run directories)  vs  a bare walk that opens and parses
  every trace.json (the floor: reading the files is the work);
* show = `primenb.harness.traces()` (query + DataFrame) plus rendering its notebook display, and
  `%prime_harness show` through a real IPython shell  vs  a bare `SELECT * ... ORDER BY created`
  on a fresh sqlite connection;
* filtered shows (--last 50, --where, --status).

    python bench/bench_harness.py [N]          (default 10000)
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
REPEAT = 15
TARGET_SHOW_S = 0.200


def _median(fn, repeat: int = REPEAT) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def make_traces(root: Path, n: int) -> int:
    """N run directories with a trace.json each; returns the mean trace size in bytes."""
    from primenb import load_config
    from primenb.config.templates import starter
    from primenb.protocol.sysinfo import deps, hardware

    config = load_config(starter(None, None, sft=False, lora=False)).resolved(primenb=True)
    base = {
        "trace_version": 1,
        "backend": "local",
        "host": "bench-host",
        "mode": "rl",
        "config": config,
        "deps": deps(),
        "hardware": hardware(),
        "git": {"commit": "0" * 40, "dirty": False, "branch": "main", "root": "/src"},
        "model": {
            "id": "primenb/tiny-byte",
            "fingerprint": "18669948bef0fbb32406",
            "num_params": 558976,
            "num_tensors": 26,
            "class": "Qwen2ForCausalLM",
        },
        "seeds": {"python": 0, "numpy": 0, "torch": 0, "data_order": 0, "sampling": 0},
    }
    rng = random.Random(0)
    states = ["completed"] * 8 + ["failed", "stopped"]
    total = 0
    t0 = 1_790_000_000.0
    for i in range(n):
        run_dir = root / f"run-{i:05d}"
        run_dir.mkdir(parents=True)
        lr = rng.choice([1e-5, 5e-5, 1e-4, 5e-4])
        cfg = json.loads(json.dumps(config))
        cfg["trainer"]["optim"]["lr"] = lr
        doc = {
            **base,
            "config": cfg,
            "trace_id": f"{i:010x}",
            "name": f"reverse-text--tiny-byte--{i:05d}",
            "parent": f"{i - 1:010x}" if i % 4 else None,
            "status": rng.choice(states),
            "created": t0 + 60 * i,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t0 + 60 * i)),
            "duration_s": rng.uniform(20, 600),
            "steps": {"start": 0, "last": 300, "max": 300},
            "adapter": {"type": "lora", "rank": 16, "alpha": 32.0} if i % 3 == 0 else None,
            "data": {
                "train": {
                    "hash": f"{rng.getrandbits(256):064x}",
                    "examples": 20000,
                    "sources": [
                        {
                            "name": "reverse-text",
                            "env_id": "reverse-text",
                            "version": "1",
                            "args": {"seed": i % 5},
                            "hash": f"{rng.getrandbits(256):064x}",
                        }
                    ],
                }
            },
            "metrics": {
                "final_reward": rng.random(),
                "final_loss": rng.random(),
                "best_eval": {"key": "eval/reverse-text/reward", "value": rng.random(), "step": 250},
                "final_eval": {"key": "eval/reverse-text/reward", "value": rng.random(), "step": 300},
            },
            "revision": 3,
        }
        text = json.dumps(doc, indent=1)
        total += len(text)
        (run_dir / "trace.json").write_text(text)
    return total // max(1, n)


def bare_walk(root: Path) -> int:
    count = 0
    for entry in os.scandir(root):
        try:
            with open(os.path.join(entry.path, "trace.json"), encoding="utf-8") as fh:
                json.load(fh)
            count += 1
        except OSError:
            pass
    return count


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="primenb-bench-harness-"))
    os.environ["PRIME_HOME"] = str(tmp / "home")
    runs = tmp / "runs"
    t = time.perf_counter()
    size = make_traces(runs, N)
    print(f"generated {N} run directories in {time.perf_counter() - t:.1f} s (trace.json ~{size / 1024:.1f} KiB each)")

    import sqlite3

    import primenb.harness as h
    from primenb.protocol.index import Index

    # -- reindex -------------------------------------------------------------------------------
    bare = min(_median(lambda: bare_walk(runs), 1) for _ in range(3))
    reindex_times = []
    for _ in range(3):
        for suffix in ("", "-wal", "-shm"):
            Path(str(Index().path) + suffix).unlink(missing_ok=True)
        t = time.perf_counter()
        stats = h.reindex([str(runs)])
        reindex_times.append(time.perf_counter() - t)
    assert stats["traces"] == N, stats
    t = time.perf_counter()
    h.reindex()  # again, onto a full index
    again = time.perf_counter() - t
    reindex = statistics.median(reindex_times)
    db = Index().path
    print(
        f"reindex of {N} run directories (empty index): {reindex * 1000:.0f} ms  "
        f"| bare walk + json parse: {bare * 1000:.0f} ms  | ratio {reindex / bare:.2f}x"
    )
    print(f"reindex onto a full index: {again * 1000:.0f} ms; index size {db.stat().st_size / 1e6:.1f} MB")

    # -- show ----------------------------------------------------------------------------------
    def bare_select() -> None:
        con = sqlite3.connect(db)
        con.execute("SELECT * FROM traces ORDER BY created DESC").fetchall()
        con.close()

    t = time.perf_counter()
    df = h.traces()
    cold = time.perf_counter() - t  # includes importing pandas
    assert len(df) == N
    base_t = _median(bare_select)
    query_t = _median(lambda: h.traces())
    render_t = _median(lambda: h.traces()._repr_html_())
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "primenb")
    magic_t = _median(lambda: shell.run_line_magic("prime_harness", "show")._repr_html_())
    verdict = "OK" if render_t < TARGET_SHOW_S and magic_t < TARGET_SHOW_S else "OVER TARGET"
    print(
        f"show over {N} traces: traces() {query_t * 1000:.0f} ms; + notebook display {render_t * 1000:.0f} ms; "
        f"%prime_harness show (displayed) {magic_t * 1000:.0f} ms  "
        f"[target < {TARGET_SHOW_S * 1000:.0f} ms: {verdict}]"
    )
    print(
        f"  bare sqlite SELECT * ORDER BY created (fresh connection): {base_t * 1000:.0f} ms  "
        f"| ratio show/bare {render_t / base_t:.1f}x; "
        f"first call in a fresh process (pandas import) {cold * 1000:.0f} ms"
    )
    for label, kwargs in (
        ("--last 50", {"last": 50}),
        ("--status failed", {"status": "failed"}),
        ('--where "lr > 1e-4 and lora_rank = 16"', {"where": "lr > 1e-4 and lora_rank = 16"}),
    ):
        ft = _median(lambda kw=kwargs: h.traces(**kw)._repr_html_())  # type: ignore[misc]
        print(f"show {label}: {ft * 1000:.1f} ms ({len(h.traces(**kwargs))} rows)")
    lookup = _median(lambda: h.get(f"{N // 2:010x}"))
    print(f"lookup of one trace by id (index + trace.json): {lookup * 1000:.1f} ms")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
