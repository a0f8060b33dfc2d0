"""Every chart panel of the live monitor has data, in JupyterLab and in Notebook 7 (headless system
Chromium), for runs with an SFT warm-up and for GRPO runs, five of each (0 empty panels of 10
monitors is the bar: the old plotly FigureWidget came up as one empty default plot for every run
with a warm-up).

No training here: the kernel writes ten run directories as the engine does (status.json and
metrics rows, a few per second) and shows each run's monitor, the way ``%prime_train`` does. The
monitors are displayed while their runs are still starting (charts hidden until the first step, as
in a real run), the warm-up runs show their warm-up panels, then move on to GRPO when the test
says so, and all end as summaries. One server, one page: a few seconds per frontend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.jupyterlab import (
    Lab,
    chromium_page,
    jupyterlab,
    lab_command,
    open_notebook,
    require_ui,
    screenshot,
    write_notebook,
)
from tests.polling import wait_for

pytestmark = pytest.mark.slow  # a Jupyter server + Chromium

REPEATS = 5
# the kernel side: a run directory fed like the engine feeds it (threads, so every cell returns at once)
FEEDER = """
import json, threading, time
from pathlib import Path
from primenb.run import Run
from primenb.notebook.monitor import show_monitor

FAKE = Path("fake-runs")

def _status(d, **fields):
    (d / "status.json.tmp").write_text(json.dumps({"name": d.name, "backend": "local", "mode": "rl",
        "max_steps": 6, "started_at": "2026-01-01T00:00:00+0000", **fields}))
    (d / "status.json.tmp").replace(d / "status.json")

def _rows(d, rows):
    with open(d / "metrics.jsonl", "a") as fh:
        for r in rows:
            fh.write(json.dumps({"time": time.time(), **r}) + "\\n")

def _wait(path):
    while not path.exists():
        time.sleep(0.1)

def _feed(d, warmup):
    time.sleep(1.0)  # the monitor is on the page before any step: its charts are hidden until then
    if warmup:  # its step-0 eval comes first, alone for a moment (no loss yet)
        _status(d, state="running", phase="sft warmup", phase_step=0, phase_total=6)
        _rows(d, [{"step": 0, "phase": "sft warmup", "warmup/eval/rt/reward": 0.0}])
        time.sleep(1.5)
        for i in range(1, 7):
            _status(d, state="running", phase="sft warmup", phase_step=i, phase_total=6)
            _rows(d, [{"step": i, "phase": "sft warmup", "warmup/loss": 5.0 - 0.5 * i,
                       "warmup/grad_norm": 1.0 + 0.1 * i, "warmup/mean_token_accuracy": 0.1 * i}])
            time.sleep(0.2)
        _wait(FAKE / "GO")
        _status(d, state="running", phase="training", step=0)  # GRPO's step-0 eval, alone for its first step
        _rows(d, [{"step": 0, "phase": "rl", "eval/rt/reward": 0.3}])
        time.sleep(1.5)
    else:
        _rows(d, [{"step": 0, "phase": "rl", "eval/rt/reward": 0.1}])
    for i in range(1, 7):
        _status(d, state="running", phase="training", step=i)
        _rows(d, [{"step": i, "phase": "rl", "reward": 0.1 * i, "reward_std": 0.05, "frac_reward_zero_std": 0.25,
                   "loss": 0.01 * i, "grad_norm": 1.0}])
        if i == 2:  # an eval every 2 steps: a run's plain eval panel comes with its second point
            _rows(d, [{"step": i, "phase": "rl", "eval/rt/reward": 0.2}])
        time.sleep(0.2)
    _wait(FAKE / "DONE")
    _status(d, state="completed", phase="done", step=6, ended_at="2026-01-01T00:01:00+0000")

def fake_run(name, warmup):
    d = FAKE / name
    (d / "configs").mkdir(parents=True)
    (d / "configs" / "resolved.json").write_text("{}")
    (d / "metrics.jsonl").write_text("")
    _status(d, state="running", phase="starting")
    threading.Thread(target=_feed, args=(d, warmup), daemon=True).start()
    show_monitor(Run(d))
"""
CELLS = [FEEDER] + [f'fake_run("{kind}{i}", {kind == "warm"})' for i in range(REPEATS) for kind in ("warm", "grpo")]

# every live monitor on the page: its run's name and, per visible chart panel, its title and how
# many lines or dots it draws
PANELS = """() => [...document.querySelectorAll('.primenb-monitor')].map(m => ({
  name: m.querySelector('b')?.textContent ?? '',
  panels: [...m.querySelectorAll('.primenb-chart')].filter(p => p.offsetParent !== null).map(p => ({
    title: p.querySelector('svg text')?.textContent ?? '',
    data: p.querySelectorAll('svg polyline, svg circle').length,
  })),
}))"""
# the warm-up's one eval (before it starts) is no panel of its own: it comes with GRPO's first
WARMUP_PANELS = ["SFT warm-up loss", "warm-up token accuracy", "warmup/grad_norm"]
WHOLE_RUN_PANELS = ["train reward (± std)", "eval reward (warm-up, then GRPO)", "loss", "grad_norm"]
GRPO_EVAL_PANELS = ["train reward (± std)", "eval reward", "loss", "grad_norm"]


def _settle(
    page: Any, expected: dict[str, list[str]], timeout_s: float, what: str, empty: set[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The monitors once each shows ``expected[name]`` panels; on timeout, what the page showed.
    Every empty panel seen on the way (a moment counts too) is added to ``empty``."""
    last: list[list[dict[str, Any]]] = [[]]

    def settled() -> list[dict[str, Any]] | None:
        last[0] = seen = page.evaluate(PANELS)
        empty.update((m["name"], p["title"]) for m in seen for p in m["panels"] if p["data"] == 0)
        by_name = {m["name"]: [p["title"] for p in m["panels"]] for m in seen}
        return seen if all(by_name.get(n) == titles for n, titles in expected.items()) else None

    try:
        return wait_for(settled, timeout_s, what)
    except AssertionError as e:
        screenshot(page, "charts-timeout")
        raise AssertionError(f"{e}; the page showed {last[0]}") from None


def _assert_all_drawn(seen: list[dict[str, Any]], n: int) -> None:
    assert len(seen) == n, seen
    empty = [(m["name"], p["title"]) for m in seen for p in m["panels"] if p["data"] == 0]
    assert not empty, f"empty chart panels: {empty}"


@pytest.fixture(scope="module", params=["jupyterlab", "notebook"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_ui()
    tmp = tmp_path_factory.mktemp(f"charts-{request.param}")
    with jupyterlab(tmp, tmp / "home", app=request.param) as lab:
        yield lab


def test_every_panel_of_every_monitor_has_data(server: Lab) -> None:
    t0 = time.monotonic()
    write_notebook(server.root / "charts.ipynb", CELLS)
    fake = server.root / "fake-runs"
    warm = [f"warm{i}" for i in range(REPEATS)]
    grpo = [f"grpo{i}" for i in range(REPEATS)]
    empty: set[tuple[str, str]] = set()
    with chromium_page(height=1200) as page:
        open_notebook(page, server, "charts.ipynb")
        lab_command(page, "notebook:run-all-cells", wait=False)  # watch from the first monitor on
        # the warm-up runs in their warm-up, the GRPO runs training with an eval
        expected = {**dict.fromkeys(warm, WARMUP_PANELS), **dict.fromkeys(grpo, GRPO_EVAL_PANELS)}
        seen = _settle(page, expected, 90, "every monitor to show its panels", empty)
        _assert_all_drawn(seen, 2 * REPEATS)
        screenshot(page, f"charts-warmup-{server.app}")
        # the warm-up runs move on to GRPO: its step-0 eval joins the warm-up's on one whole-run panel
        (fake / "GO").write_text("")
        expected = {**dict.fromkeys(warm, WHOLE_RUN_PANELS), **dict.fromkeys(grpo, GRPO_EVAL_PANELS)}
        seen = _settle(page, expected, 60, "the warm-up runs to show their GRPO panels", empty)
        _assert_all_drawn(seen, 2 * REPEATS)
        (fake / "DONE").write_text("")
        wait_for(lambda: page.locator(".primenb-summary").count() == 2 * REPEATS, 60, "every run's summary")
        assert not empty, f"empty chart panels on the way: {sorted(empty)}"
        assert page.locator(".primenb-monitor").count() == 0
    print(f"{server.app}: {time.monotonic() - t0:.1f}s for {2 * REPEATS} monitors")
