"""The widgets in Jupyter Notebook 7 (not only JupyterLab): the live monitor, the config builder and
the harness browser render and answer clicks there, and the saved notebook reopened in Notebook 7
with a fresh kernel shows the static snapshots, never "Error displaying widget".

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
    wait_for,
    write_notebook,
)
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
]
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
                lab_command(page, "notebook:run-all-cells")

                # the live monitor renders (phase line), follows the run to its summary; the builder and
                # browser render beside it
                expect(page.locator(".primenb-monitor .primenb-phase-text").first).to_be_visible(timeout=60_000)
                _no_widget_error(page)
                summary = page.locator(".primenb-summary")
                expect(summary.filter(has_text="completed")).to_have_count(1, timeout=240_000)
                assert f"completed at step {STEPS}/{STEPS}" in summary.first.inner_text()
                builder = page.locator(".primenb-builder")
                expect(builder.get_by_text("✓ valid SFT config")).to_be_visible(timeout=60_000)
                hb = page.locator(".primenb-harness-browser")
                expect(hb.get_by_text("1 of 1 trace(s)")).to_be_visible(timeout=60_000)
                grid = hb.locator(".primenb-grid").bounding_box()
                assert grid is not None and grid["height"] > 40 and grid["width"] > 200, grid

                # a click round-trip through the kernel: an invalid value shows its error by its field
                box = builder.locator(".primenb-field-batch_size input").first
                box.fill("10")
                box.press("Enter")
                error = builder.locator(".primenb-field-batch_size .primenb-diag-error")
                expect(error).to_contain_text("divisible by micro_batch_size", timeout=30_000)
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
                time.sleep(2)  # give any widget view the time to fail
                _no_widget_error(page)
                assert f"completed at step {STEPS}/{STEPS}" in page.locator(".primenb-summary").first.inner_text()
                screenshot(page, "notebook7-reopened")
        finally:
            stop_runs(nb7.root)
