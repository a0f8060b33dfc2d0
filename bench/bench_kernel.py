"""Kernel responsiveness while a run trains: round-trip time of a trivial cell, p50/p95, with the
monitor following a live run, against the same kernel idle. Target: p95 under 50 ms.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel

CONFIG = """max_steps = 100000
[model]
name = "primenb/tiny-byte"
[data]
name = "reverse-text"
batch_size = 32
micro_batch_size = 32
seq_len = 64
[optim]
lr = 1e-3
"""


def _exec(kc, code: str, timeout: float = 120) -> dict:
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return reply["content"]


def _round_trips(kc, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        _exec(kc, "1 + 1")
        times.append(time.perf_counter() - t0)
        time.sleep(0.05)
    return times


def _p95(xs: list[float]) -> float:
    return sorted(xs)[int(0.95 * (len(xs) - 1))]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="primenb-bench-"))
    (work / "sft.toml").write_text(CONFIG)
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(work))
    try:
        _exec(kc, "%load_ext primenb")
        idle = _round_trips(kc, 100)
        _exec(kc, "run = %prime_train sft.toml --name bench")
        _exec(kc, "import time\nwhile not run.metric_rows(): time.sleep(0.2)")  # training has started
        busy = _round_trips(kc, 100)
        state = _exec(kc, "run.stop(); print(run.state)")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    i50, i95 = statistics.median(idle) * 1000, _p95(idle) * 1000
    b50, b95 = statistics.median(busy) * 1000, _p95(busy) * 1000
    print(f"trivial cell, kernel idle          : p50 {i50:6.1f} ms  p95 {i95:6.1f} ms")
    print(
        f"trivial cell, run training+monitor : p50 {b50:6.1f} ms  p95 {b95:6.1f} ms"
        f"  ratio p95 {b95 / i95:.2f}x  target p95 < 50 ms: {'PASS' if b95 < 50 else 'FAIL'}"
    )
    print(f"(run stopped: {state.get('status')})", file=sys.stderr)


if __name__ == "__main__":
    main()
