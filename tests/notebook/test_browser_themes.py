"""The widgets in the dark theme and at 900 px, and saved snapshots after "Close and Shut Down",
in JupyterLab (headless system Chromium).

One notebook holds the config builder, the harness browser and a live monitor with a warning (a
run directory the kernel writes as the engine does, every reward flat: "no learning signal").
Checked: the warning box's text contrast (WCAG AA, 4.5:1) in the light and the dark theme; at
900 px every button shows its whole label, the builder's labels are not cut, the monitor's Stop
button and charts are not clipped; then Save, "Close and Shut Down Notebook", reopen: the
snapshots, never "Error displaying widget: model not found". Screenshots (light, dark, 900 px) go
to ``$PRIMENB_TEST_ARTIFACTS`` (default ``test-artifacts/``).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from tests.jupyterlab import (
    ARTIFACTS,
    chromium_page,
    jupyterlab,
    lab_command,
    open_notebook,
    require_ui,
    saved_outputs,
    screenshot,
    set_theme,
    text_contrasts,
    wait_outputs_settled,
    write_notebook,
)
from tests.polling import wait_for
from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # JupyterLab + Chromium

CONFIG = sft_toml(steps=4, model="primenb/tiny-byte-xs", batch_size=8, micro_batch_size=4, seq_len=48)
FLAT_RUN = """
import json
from pathlib import Path
from primenb.run import Run
from primenb.notebook.monitor import show_monitor

d = Path("fake-runs") / "flat"
(d / "configs").mkdir(parents=True)
(d / "configs" / "resolved.json").write_text("{}")
(d / "status.json").write_text(json.dumps({"name": "flat", "backend": "local", "mode": "rl", "state": "running",
    "phase": "training", "step": 4, "max_steps": 40, "started_at": "2026-01-01T00:00:00+0000"}))
(d / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "phase": "rl", "reward": 0.0, "reward_std": 0.0,
    "frac_reward_zero_std": 1.0, "loss": 0.0, "grad_norm": 0.1 * i}) + "\\n" for i in range(1, 5)))
show_monitor(Run(d))
"""
# a finished run with long samples: its summary at 900 px with the sidebar open (a 448 px output)
DONE_RUN = """
import json
from pathlib import Path
from primenb.run import Run
d = Path("fake-runs") / "done-run"
(d / "configs").mkdir(parents=True)
(d / "configs" / "resolved.json").write_text("{}")
(d / "status.json").write_text(json.dumps({"name": "done-run", "backend": "local", "mode": "rl",
    "state": "completed", "phase": "done", "step": 4, "max_steps": 4, "trace_id": "abc123",
    "final_checkpoint": "outputs/done-run/checkpoints/step_4",
    "started_at": "2026-01-01T00:00:00+0000", "ended_at": "2026-01-01T00:01:15+0000"}))
(d / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "phase": "rl", "reward": 0.1 * i,
    "loss": -0.000633 * i}) + "\\n" for i in range(1, 5)))
(d / "samples.jsonl").write_text("".join(json.dumps({"step": i, "prompt": "reverse: " + "abcdefghij" * 6,
    "completion": "jihgfedcba" * 10, "reward": 0.5}) + "\\n" for i in range(1, 5)))
Run(d)
"""
# what of the summary reaches past its output area, and which command words are split over lines
SUMMARY_FIT = """() => {
  const s = document.querySelector('.primenb-summary');
  const area = s.closest('.jp-OutputArea-output').getBoundingClientRect();
  const over = [...s.querySelectorAll('table, svg, code, div')]
    .filter(e => e.getBoundingClientRect().right > area.right + 1).map(e => e.tagName + ' ' + e.className);
  const words = [...s.querySelectorAll('.primenb-command span')];
  return {width: area.width, over, words: words.length,
          split: words.filter(w => w.getClientRects().length > 1).map(w => w.textContent)};
}"""
CELLS = [
    "%load_ext primenb\nimport primenb",
    f"%%rltoml cfg\n{CONFIG}",
    "b = primenb.ConfigBuilder(cfg)\nb",
    "hb = primenb.HarnessBrowser(refresh_seconds=1)\nhb",
    FLAT_RUN,
    DONE_RUN,
]
WIDGETS = ".primenb-monitor, .primenb-builder, .primenb-harness-browser"
WIDGET_ERRORS = ("Error displaying widget", "model not found")

# what does not fit: buttons whose label is empty or cut, labels cut, monitor parts past the output
CLIPPED = """(sel) => {
  const shown = e => e.offsetParent !== null;
  const cut = e => e.scrollWidth > e.clientWidth + 1;
  const buttons = [...document.querySelectorAll(sel)].flatMap(w => [...w.querySelectorAll('button')]).filter(shown);
  const labels = [...document.querySelectorAll('.primenb-builder .widget-label')].filter(shown);
  const out = [];
  for (const b of buttons) if (!b.textContent.trim() || cut(b)) out.push('button: ' + (b.textContent.trim() || b.title || '(icon)'));
  for (const l of labels) if (cut(l)) out.push('label: ' + l.textContent);
  const m = document.querySelector('.primenb-monitor');
  const area = m.closest('.jp-OutputArea-output').getBoundingClientRect();
  for (const part of [...m.querySelectorAll('button, .primenb-chart')].filter(shown)) {
    const r = part.getBoundingClientRect();
    if (r.right > area.right + 1) out.push('clipped: ' + (part.textContent.trim().slice(0, 30) || part.className));
  }
  return {out, buttons: buttons.length, labels: labels.length};
}"""


def _no_widget_error(page: Any) -> None:
    body = page.locator(".jp-Notebook").first.inner_text()
    for error in WIDGET_ERRORS:
        assert error not in body, body[-2000:]


def _warning_contrast(page: Any) -> float:
    (ratio,) = text_contrasts(page, ".primenb-monitor .primenb-warning")
    return ratio


def test_dark_theme_narrow_page_and_close_and_shut_down(tmp_path: Path) -> None:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect

    require_ui()
    t0 = time.monotonic()
    with jupyterlab(tmp_path, tmp_path / "home") as lab:
        nb = write_notebook(lab.root / "themes.ipynb", CELLS)
        with chromium_page(1400, 1100) as page:
            open_notebook(page, lab, nb.name)
            lab_command(page, "notebook:run-all-cells")
            expect(page.locator(".primenb-builder").get_by_text("✓ valid SFT config")).to_be_visible(timeout=60_000)
            expect(page.locator(".primenb-harness-browser .primenb-grid")).to_be_visible(timeout=60_000)
            warning = page.locator(".primenb-monitor .primenb-warning")
            expect(warning).to_contain_text("no learning signal", timeout=60_000)
            _no_widget_error(page)
            with contextlib.suppress(PlaywrightError):  # JupyterLab's news toast, over the outputs
                page.get_by_role("button", name="No", exact=True).click(timeout=2000)

            light = _warning_contrast(page)
            warning.scroll_into_view_if_needed()
            shots = [screenshot(page, "themes-light")]
            set_theme(page, "JupyterLab Dark", light=False)
            dark = _warning_contrast(page)
            shots.append(screenshot(page, "themes-dark"))
            assert light >= 4.5 and dark >= 4.5, (light, dark)

            set_theme(page, "JupyterLab Light", light=True)
            page.set_viewport_size({"width": 900, "height": 1100})
            time.sleep(1)
            fit = page.evaluate(CLIPPED, WIDGETS)
            page.locator(".primenb-builder").scroll_into_view_if_needed()
            shots.append(screenshot(page, "themes-900px-builder"))
            page.locator(".primenb-monitor").scroll_into_view_if_needed()
            shots.append(screenshot(page, "themes-900px-monitor"))
            assert fit["buttons"] >= 10 and fit["labels"] >= 5, fit
            assert fit["out"] == [], fit["out"]
            # the sidebar open too: the summary's samples and commands stay in their output area
            page.locator('.jp-SideBar [data-id="primenb-runs"]').click()
            expect(page.locator("#primenb-runs")).to_be_visible(timeout=120_000)
            wait_for(
                lambda: page.evaluate(SUMMARY_FIT)["width"] < 600, 120, "the notebook to narrow beside the sidebar"
            )
            summary = page.locator(".primenb-summary")
            summary.scroll_into_view_if_needed()
            shots.append(screenshot(page, "themes-900px-summary-sidebar"))
            fit = page.evaluate(SUMMARY_FIT)
            assert fit["width"] < 600 and fit["words"] >= 3, fit  # narrow indeed, with commands in it
            assert fit["over"] == [] and fit["split"] == [], fit

            # Save, then Close and Shut Down (its confirmation answered): the saved file keeps the snapshots
            lab_command(page, "docmanager:save")
            wait_for(lambda: "primenb-builder-static" in nb.read_text(), 120, "the notebook to be saved")
            lab_command(page, "notebook:close-and-shutdown", wait=False)
            dialog = page.locator(".jp-Dialog .jp-mod-accept")
            dialog.click(timeout=120_000)
            wait_for(lambda: lab.get("api/sessions") == [], 60, "the notebook's kernel to shut down")
        views = [o for o in saved_outputs(nb) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert views == [], views

        with chromium_page(1400, 1100) as page:
            open_notebook(page, lab, nb.name)
            expect(page.locator(".primenb-builder-static").first).to_be_visible(timeout=60_000)
            wait_outputs_settled(page)  # every view in its final state: none left to fail
            _no_widget_error(page)
            screenshot(page, "themes-reopened")
    print(f"themes: {time.monotonic() - t0:.1f}s; screenshots: {[str(s) for s in shots]} in {ARTIFACTS}")
