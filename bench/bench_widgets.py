"""The widgets' Python side at scale: the harness browser over N synthetic traces, and config
builder updates.

Each figure is printed beside a baseline measured in the same run:

* browser build (filters + grid data for N rows)  vs  the pandas work alone (copy + sort of the
  same frame): the grid's own cost is the ratio;
* one filter change / one text search over N rows  vs  the same boolean mask in bare pandas;
* the bytes the grid sends for N rows (JSON state + binary buffers), per row;
* one builder form edit (TOML rewrite + validation + form refresh)  vs  `primenb.config.check`
  alone on the same text: what the form adds to the `%%rltoml` validation.

    python bench/bench_widgets.py [N]          (default 10000)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
REPEAT = 7


def timed(fn: Any, repeat: int = REPEAT) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main() -> None:
    from ipywidgets.widgets.widget import _remove_buffers

    from primenb.config import check
    from primenb.notebook.browser import HarnessBrowser
    from primenb.notebook.builder import ConfigBuilder
    from tests.notebook.test_widgets import synthetic_table
    from tests.tiny import rl_toml

    table = synthetic_table(N)
    base_build = timed(lambda: table.copy().sort_values("created", ascending=False))
    build = timed(lambda: HarnessBrowser(load=lambda: table), repeat=3)
    b = HarnessBrowser(load=lambda: table)
    print(f"browser build, {N} traces: {build * 1e3:.0f} ms", end="  ")
    print(f"(pandas copy+sort {base_build * 1e3:.1f} ms, x{build / base_build:.0f})")

    flip = iter(["failed", "any"] * REPEAT)
    filt = timed(lambda: setattr(b.status_filter, "value", next(flip)))
    base_filt = timed(lambda: table[table.status == "failed"])
    print(f"status filter: {filt * 1e3:.0f} ms", end="  ")
    print(f"(bare mask {base_filt * 1e3:.2f} ms, x{filt / base_filt:.0f})")

    words = iter([f"run-{i}" for i in range(REPEAT)])
    search = timed(lambda: setattr(b.search, "value", next(words)))
    base_search = timed(lambda: table[table.name.str.contains("run-1", regex=False)])
    print(f"text search: {search * 1e3:.0f} ms", end="  ")
    print(f"(bare str.contains {base_search * 1e3:.2f} ms, x{search / base_search:.0f})")

    b.search.value, b.status_filter.value = "", "any"
    state, _, buffers = _remove_buffers(b.grid.get_state())
    sent = len(json.dumps(state["_data"])) + sum(len(x) for x in buffers)
    print(
        f"grid payload, {len(b.grid.data)} rows: {sent / 1e6:.2f} MB ({sent / max(1, len(b.grid.data)):.0f} bytes/row)"
    )

    builder = ConfigBuilder(rl_toml())
    steps = iter(range(2, 10_000))
    edit = timed(lambda: builder.set(max_steps=next(steps)), repeat=50)
    validate = timed(lambda: check(builder.text), repeat=50)
    print(f"builder form edit: {edit * 1e3:.1f} ms  (check() alone {validate * 1e3:.1f} ms, x{edit / validate:.1f})")


if __name__ == "__main__":
    main()
