"""The run monitor as a person sees it: JupyterLab on 127.0.0.1 in headless system Chromium.

The notebook runs the quickstart path on the embedded extra-small model (an SFT warm-up, then
GRPO, a few steps each). The test watches every phase (the phase line's text, the bar's numbers,
the chart panels filling, the "no learning signal" warning: so short a warm-up leaves every reward
at 0), the summary that replaces the widget at the end, then saves the notebook, shuts its kernel
down, reopens it with a fresh kernel and checks that the summary is shown and no widget error is.
Screenshots go to ``$PRIMENB_TEST_ARTIFACTS`` (default ``test-artifacts/``), the two best also to
docs/img/ (monitor-live.png, monitor-summary.png).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest

from tests.jupyterlab import (
    ARTIFACTS,
    ROOT,
    WIDGET_VIEW,
    Lab,
    chromium_page,
    jupyterlab,
    lab_command,
    open_notebook,
    require_ui,
    screenshot,
    stop_runs,
    wait_outputs_settled,
    write_notebook,
)
from tests.polling import wait_for
from tests.tiny import rl_toml

pytestmark = pytest.mark.slow  # JupyterLab + Chromium + a real tiny run

WARMUP, STEPS = 12, 12
CONFIG = rl_toml(
    steps=STEPS,
    model="primenb/tiny-byte-xs",
    batch_size=8,
    group_size=4,
    max_tokens=24,
    seq_len=64,
    primenb=f"sft_warmup_steps = {WARMUP}\nlogging_steps = 1\nsample_every = 2\nseed = 1",
    extra=(
        "[orchestrator.eval]\ninterval = 6\nnum_examples = 8\n\n[[orchestrator.eval.source]]\n"
        'name = "reverse-text"\n\n[orchestrator.eval.source.env.taskset]\nid = "reverse-text"\n'
    ),
)
CELLS = ["%load_ext primenb", f"%%rltoml cfg\n{CONFIG}", "run = %prime_train cfg --name qs"]

# what the page shows, read in one evaluation so text and bar belong to the same moment
SNAPSHOT = """() => {
  const m = document.querySelector('.primenb-monitor');
  const s = document.querySelector('.primenb-summary');
  const bar = m?.querySelector('.progress-bar');
  const charts = m ? [...m.querySelectorAll('.primenb-chart')].filter(p => p.offsetParent !== null) : [];
  return {
    phase: m?.querySelector('.primenb-phase-text')?.textContent ?? null,
    bar: bar ? parseFloat(bar.style.width || bar.style.height || '0') : null,
    panels: charts.map(p => p.querySelector('svg text')?.textContent ?? ''),
    drawn: charts.filter(p => p.querySelector('svg polyline, svg circle')).length,
    empty: charts.filter(p => !p.querySelector('svg polyline, svg circle')).length,
    // panels whose chart is a single dot (the old warm-up eval panel: one point at 0 for the warm-up)
    dots: charts.filter(p => !p.querySelector('svg polyline') && p.querySelector('svg circle'))
      .map(p => p.querySelector('svg text')?.textContent ?? ''),
    marked: charts.filter(p => p.querySelector('.primenb-mark')).map(p => p.querySelector('svg text')?.textContent),
    search: m ? [...m.querySelectorAll('input')].some(i => i.offsetParent !== null) : null,
    warning: m?.querySelector('.primenb-warning')?.textContent ?? null,
    stop: m?.querySelector('button')?.textContent?.trim() ?? null,
    summary: s ? s.textContent : null,
    summaryState: s ? s.getAttribute('data-state') : null,
  };
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_ui()
    tmp = tmp_path_factory.mktemp("monitor-lab")
    with jupyterlab(tmp, tmp / "home") as server:
        try:
            yield server
        finally:
            stop_runs(server.root)


def _watch(page: Any, timeout_s: float) -> list[dict[str, Any]]:
    """Snapshots every ~0.3 s until the summary says the run ended; a live screenshot on the way."""
    from playwright.sync_api import Error as PlaywrightError

    seen: list[dict[str, Any]] = []
    live_shot = 0  # how good the live screenshot taken so far is (see _live_quality)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        snap = page.evaluate(SNAPSHOT)
        seen.append(snap)
        if snap["summaryState"] in ("completed", "failed", "stopped"):
            return seen
        quality = _live_quality(snap)
        if quality > live_shot:
            _dismiss_news(page, wait=False)  # a wait here could outlast GRPO's few steps
            try:
                monitor = page.locator(".primenb-monitor").first
                monitor.scroll_into_view_if_needed()
                screenshot(page, "monitor-live-page")
                monitor.screenshot(path=str(ARTIFACTS / "monitor-live.png"))
                live_shot = quality
            except PlaywrightError:  # the run ended meanwhile and its summary replaced the live view
                pass
        time.sleep(0.3)
    raise AssertionError(f"the run did not end within {timeout_s}s; last view: {seen[-1] if seen else None}")


def _live_quality(snap: dict[str, Any]) -> int:
    """How good a live screenshot of this view would be: 0 none (nothing drawn yet), 1 warm-up
    drawn, 2 GRPO drawn, 3 GRPO's three panels with the warning. A quiet machine can run all of
    GRPO's few steps between two snapshots (or while one screenshot is taken), so the warm-up's
    view is kept as the fallback: a live view is always taken, the best one when there is time."""
    if snap["drawn"] < 1:
        return 0
    if not (snap["phase"] or "").startswith("training (GRPO)"):
        return 1
    return 3 if snap["drawn"] >= 3 and snap["warning"] else 2


def _step_lines(seen: list[dict[str, Any]], label: str) -> list[tuple[int, int, float | None]]:
    """(step, total, bar %) of every snapshot whose phase line is ``label · step k/N``."""
    out = []
    for snap in seen:
        m = re.match(re.escape(label) + r" · step (\d+)/(\d+)", snap["phase"] or "")
        if m:
            out.append((int(m.group(1)), int(m.group(2)), snap["bar"]))
    return out


def _dismiss_news(page: Any, *, wait: bool = True) -> None:
    """JupyterLab asks about news in a toast over the outputs: answer it so screenshots are clean.
    ``wait=False``: only when the toast is already shown (no wait for one to appear)."""
    from playwright.sync_api import Error

    button = page.get_by_role("button", name="No", exact=True)
    with contextlib.suppress(Error):
        if wait or button.count():
            button.click(timeout=1000)


def _shutdown_kernels(lab: Lab) -> None:
    for session in lab.get("api/sessions"):
        req = urllib.request.Request(
            f"{lab.base}/api/kernels/{session['kernel']['id']}",
            method="DELETE",
            headers={"Authorization": f"token {lab.token}"},
        )
        urllib.request.urlopen(req, timeout=30).read()


def test_monitor_phases_summary_and_saved_notebook(lab: Lab) -> None:
    write_notebook(lab.root / "monitor.ipynb", CELLS)
    with chromium_page(height=1500) as page:  # tall enough for the whole monitor in one screenshot
        open_notebook(page, lab, "monitor.ipynb")
        lab_command(page, "notebook:run-all-cells")
        seen = _watch(page, 300)

        # before the first step: a line that says what is happening, not an empty chart
        early = [s["phase"] for s in seen if s["phase"] and "charts appear with the first logged step" in s["phase"]]
        assert early, [s["phase"] for s in seen][:20]
        assert any(p.startswith(("importing torch", "building the model", "building the trainer")) for p in early)
        # the warm-up counts its own steps, then GRPO counts from 0 of max_steps (no "step 20/30" of warm-up)
        warm = _step_lines(seen, "SFT warm-up")
        assert warm and {t for _, t, _ in warm} == {WARMUP}, warm
        rl = _step_lines(seen, "training (GRPO)")
        assert rl and {t for _, t, _ in rl} == {STEPS}, rl
        # the bar shows the same numbers as the line
        assert any(bar is not None and abs(bar - 100 * k / t) < 1.0 for k, t, bar in warm + rl), warm + rl
        # the charts follow the phase, with data in every panel shown
        assert any(s["panels"][:1] == ["SFT warm-up loss"] and s["drawn"] >= 1 for s in seen)
        assert max(s["empty"] for s in seen) == 0, [s["panels"] for s in seen if s["empty"]][:3]
        whole = "eval reward (warm-up, then GRPO)"
        rl_views = [s for s in seen if s["panels"][:3] == ["train reward (± std)", whole, "loss"]]
        assert rl_views and max(s["drawn"] for s in rl_views) >= 3
        # the eval panel: never a lone dot (the warm-up's step-0 eval), marked where GRPO starts
        assert not [s["dots"] for s in seen if any(t.startswith("eval reward") for t in s["dots"])]
        assert all(s["marked"] == [whole] for s in rl_views), rl_views[-1]
        # the metric search box comes with the first panel, not before
        assert not [s for s in seen if s["search"] and not s["panels"]], [s for s in seen if s["search"]][:1]
        assert any(s["search"] for s in seen)
        # every reward is 0 after so short a warm-up: the monitor says so
        warned = [s["warning"] for s in seen if s["warning"]]
        assert warned and "no learning signal: every completion in a group gets the same reward" in warned[-1]

        # the end: the widget is replaced by the summary (no monitor left), with the facts and next steps
        final = seen[-1]
        assert final["summaryState"] == "completed", final
        summary = final["summary"]
        for text in (
            f"completed at step {STEPS}/{STEPS}",
            "wall time:",
            "eval/reverse-text/reward: final",
            f"checkpoint: outputs/qs/checkpoints/step_{STEPS}",
            "trace: ",
            "%prime_harness apply ",
            "primenb.generate(",
            "no learning signal",
        ):
            assert text in summary, (text, summary)
        assert str(lab.root) not in summary
        wait_for(lambda: page.locator(".primenb-monitor").count() == 0, 120, "the live widget to be replaced")
        _dismiss_news(page)
        out = page.locator(".primenb-summary").first
        out.scroll_into_view_if_needed()
        # shown, not only in the DOM: a page-wide rule for another ".primenb-run" once squeezed
        # the summary into a 36 px box in a zero-height output
        box = out.bounding_box()
        shown = page.evaluate(
            "() => document.querySelector('.primenb-summary').closest('.jp-OutputArea-child')"
            "?.getBoundingClientRect().height ?? 0"
        )
        assert box is not None and box["height"] > 200 and shown > 200, (box, shown)
        screenshot(page, "monitor-summary-page")
        out.screenshot(path=str(ARTIFACTS / "monitor-summary.png"))

        lab_command(page, "docmanager:save")
        saved = lab.root / "monitor.ipynb"
        wait_for(lambda: "primenb-summary" in saved.read_text(), 120, "the notebook to be saved with the summary")
    text = saved.read_text()
    assert WIDGET_VIEW not in text and str(lab.root) not in text
    outputs = [o for c in nbformat.reads(text, as_version=4).cells if c.cell_type == "code" for o in c.outputs]
    assert any("<svg" in o.get("data", {}).get("text/html", "") for o in outputs)

    # reopened with a fresh kernel: the summary, never "Error displaying widget: model not found"
    _shutdown_kernels(lab)
    with chromium_page() as page:
        open_notebook(page, lab, "monitor.ipynb")
        summary = page.locator(".primenb-summary").first
        summary.wait_for(timeout=60_000)
        wait_outputs_settled(page)  # every view in its final state: none left to fail
        body = page.locator(".jp-Notebook").first.inner_text()
        assert "Error displaying widget" not in body and "model not found" not in body
        assert f"completed at step {STEPS}/{STEPS}" in summary.inner_text()
        assert summary.locator("svg").count() >= 3
        _dismiss_news(page)
        summary.scroll_into_view_if_needed()
        screenshot(page, "monitor-reopened")

    docs_img = ROOT / "docs" / "img"
    docs_img.mkdir(parents=True, exist_ok=True)
    for name in ("monitor-live.png", "monitor-summary.png"):
        assert (ARTIFACTS / name).exists(), name
        shutil.copy(ARTIFACTS / name, docs_img / name)
