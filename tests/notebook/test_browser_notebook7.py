"""The widgets in Jupyter Notebook 7 (not only JupyterLab): the live monitor, the config builder and
the harness browser render and answer clicks there, also while another cell keeps the kernel busy
(the monitor moves on, an edit's validation waits for the kernel, then runs), and the saved notebook
reopened in Notebook 7 with a fresh kernel shows the static snapshots, never "Error displaying
widget".

Notebook 7 is a different application shell over the same notebook and widget pieces; a widget
that only works in JupyterLab's shell would fail here. Screenshots go to ``$PRIMENB_TEST_ARTIFACTS``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.jupyterlab import (
    WIDGET_VIEW,
    chromium_page,
    jupyterlab,
    lab_command,
    open_notebook,
    require_ui,
    saved_outputs,
    screenshot,
    stop_runs,
    wait_outputs_settled,
    write_notebook,
)
from tests.polling import wait_for
from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # Notebook 7 + Chromium + a real tiny run

STEPS = 4
CONFIG = sft_toml(steps=STEPS, model="primenb/tiny-byte-xs", batch_size=8, micro_batch_size=4, seq_len=48)
CELLS = [
    "%load_ext primenb\nimport primenb",
    f"%%rltoml cfg\n{CONFIG}",
    "run = %prime_train cfg --name nb7",
    "b = primenb.ConfigBuilder(cfg)\nb",
    "hb = primenb.HarnessBrowser(refresh_seconds=1)\nhb",
    "import time\nprint('kernel busy', flush=True)\ntime.sleep(25)\nprint('slept', flush=True)",
]
BUSY = "kernel busy"
# one moment of the page: the monitor (its phase line while live, its summary's state once ended),
# whether the busy cell has printed its end, and the batch size's error count
MOMENT = """() => {
  const live = document.querySelector('.primenb-monitor .primenb-phase-text');
  const ended = document.querySelector('.primenb-summary');
  const outputs = [...document.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent);
  return {
    monitor: live ? live.textContent : ended ? 'ended: ' + ended.getAttribute('data-state') : '',
    slept: outputs.some(t => t.includes('slept')),
    errors: document.querySelectorAll('.primenb-field-batch_size .primenb-diag-error').length,
  };
}"""
WIDGET_ERRORS = ("Error displaying widget", "model not found")


def _no_widget_error(page: Any) -> None:
    body = page.locator(".jp-Notebook").first.inner_text()
    for error in WIDGET_ERRORS:
        assert error not in body, body[-2000:]


def test_widgets_render_and_reopen_in_notebook7(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    require_ui()
    with jupyterlab(tmp_path, tmp_path / "home", app="notebook") as nb7:
        nb = write_notebook(nb7.root / "nb7.ipynb", CELLS)
        try:
            with chromium_page(1400, 1400) as page:
                open_notebook(page, nb7, nb.name)
                assert page.locator("#main-panel, .jp-NotebookPanel").count(), "not the Notebook 7 page"
                assert "/lab" not in page.url
                lab_command(page, "notebook:run-all-cells", wait=False)  # the last cell sleeps

                # the live monitor renders (phase line); the builder and the browser render beside it
                expect(page.locator(".primenb-monitor .primenb-phase-text").first).to_be_visible(timeout=60_000)
                builder = page.locator(".primenb-builder")
                expect(builder.get_by_text("✓ valid SFT config")).to_be_visible(timeout=60_000)
                hb = page.locator(".primenb-harness-browser")
                expect(hb.locator(".primenb-grid")).to_be_visible(timeout=60_000)
                _no_widget_error(page)

                # while the last cell keeps the kernel busy (docs/widgets.md, "When another cell is
                # busy"): the monitor moves on (a kernel thread), an edit that needs Python waits
                expect(page.locator(".jp-OutputArea-output", has_text=BUSY)).to_be_visible(timeout=60_000)
                box = builder.locator(".primenb-field-batch_size input").first
                box.fill("10")  # invalid: batch_size must divide by micro_batch_size
                box.press("Enter")
                error = builder.locator(".primenb-field-batch_size .primenb-diag-error")
                seen, errors_while_busy = set(), 0
                while not (moment := page.evaluate(MOMENT))["slept"]:
                    seen.add(moment["monitor"])
                    errors_while_busy += moment["errors"]
                    time.sleep(0.3)
                assert len(seen) >= 2, seen  # the monitor changed while the kernel was busy
                assert errors_while_busy == 0  # the edit's validation waited for the kernel...
                expect(error).to_contain_text("divisible by micro_batch_size", timeout=120_000)  # ...then ran

                summary = page.locator(".primenb-summary")
                expect(summary.filter(has_text="completed")).to_have_count(1, timeout=240_000)
                assert f"completed at step {STEPS}/{STEPS}" in summary.first.inner_text()
                expect(hb.get_by_text("1 of 1 trace(s)")).to_be_visible(timeout=60_000)
                grid = hb.locator(".primenb-grid").bounding_box()
                assert grid is not None and grid["height"] > 40 and grid["width"] > 200, grid
                _no_widget_error(page)
                builder.scroll_into_view_if_needed()
                screenshot(page, "notebook7-widgets")

                # kernel shutdown: the live displays become static HTML, saved as such
                page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.shutdown()")
                expect(page.locator(".primenb-builder-static")).to_be_visible(timeout=60_000)
                lab_command(page, "docmanager:save")
                wait_for(
                    lambda: (
                        not any(WIDGET_VIEW in o.get("data", {}) for o in saved_outputs(nb))
                        and "primenb-builder-static" in nb.read_text()
                    ),
                    30,
                    "the saved notebook to hold only static snapshots",
                )

            # reopened in Notebook 7 with a fresh kernel: the snapshots, and no widget error
            with chromium_page(1400, 1400) as page:
                open_notebook(page, nb7, nb.name)
                expect(page.locator(".primenb-summary").first).to_be_visible(timeout=60_000)
                expect(page.locator(".primenb-builder-static").first).to_be_visible()
                wait_outputs_settled(page)  # every view in its final state: none left to fail
                _no_widget_error(page)
                assert f"completed at step {STEPS}/{STEPS}" in page.locator(".primenb-summary").first.inner_text()
                screenshot(page, "notebook7-reopened")
        finally:
            stop_runs(nb7.root)
