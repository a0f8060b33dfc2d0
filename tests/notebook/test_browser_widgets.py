"""The config builder and the harness browser in a real JupyterLab and a real (headless, system)
Chromium, driven by Playwright: a config is built in the form (an invalid value shows its error
next to its field, then a fix), two tiny runs are launched from it and the monitor follows them,
the harness browser picks them up by itself and diffs them. A kernel shutdown then leaves static
HTML in the saved notebook. Screenshots of each step go to ``$PRIMENB_TEST_ARTIFACTS``
(default ``test-artifacts/``); the best two are copied to docs/img/.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.jupyterlab import (
    ARTIFACTS,
    ROOT,
    WIDGET_VIEW,
    chromium_page,
    jupyterlab,
    lab_command,
    open_notebook,
    require_ui,
    saved_outputs,
    screenshot,
    write_notebook,
)
from tests.polling import wait_for
from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # JupyterLab + Chromium + two real tiny runs

START = sft_toml(steps=4, model="primenb/tiny-byte-xs", batch_size=8, micro_batch_size=4, seq_len=48, lr=2e-3)


def _field(page: Any, key: str) -> Any:
    return page.locator(f".primenb-field-{key}")


def _type(page: Any, key: str, value: str) -> None:
    box = _field(page, key).locator("input").first
    box.fill(value)
    box.press("Enter")  # number boxes send their value on Enter / blur


def test_build_launch_monitor_and_diff_in_jupyterlab(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    require_ui()
    home = tmp_path / "home"
    with jupyterlab(tmp_path, home) as lab:
        nb = write_notebook(
            lab.root / "widgets.ipynb",
            [
                f"%load_ext primenb\nimport primenb\nb = primenb.ConfigBuilder('''{START}''')\nb",
                "hb = primenb.HarnessBrowser(refresh_seconds=1)\nhb",
            ],
        )
        with chromium_page(1500, 1100) as page:
            open_notebook(page, lab, nb.name)
            lab_command(page, "notebook:run-all-cells")
            lab_command(page, "notebook:hide-all-cell-code")  # the screenshots show the widgets
            news = page.get_by_role("button", name="No", exact=True)
            if news.count():  # JupyterLab's "news?" toast would cover a corner of every screenshot
                news.first.click()
            builder = page.locator(".primenb-builder")
            expect(builder.get_by_text("✓ valid SFT config")).to_be_visible(timeout=120_000)
            expect(page.locator(".primenb-harness-browser")).to_be_visible(timeout=60_000)
            builder.scroll_into_view_if_needed()
            screenshot(page, "widgets-1-builder")

            # an invalid value: its error appears next to its field, and the status says so
            _type(page, "batch_size", "10")
            error = _field(page, "batch_size").locator(".primenb-diag-error")
            expect(error).to_contain_text("divisible by micro_batch_size", timeout=120_000)
            expect(builder.get_by_text("✗ 1 error")).to_be_visible()
            expect(_field(page, "lr").locator(".primenb-diag-error")).to_have_count(0)
            screenshot(page, "widgets-2-invalid")

            # the fix, and a change the TOML text shows at once
            _type(page, "batch_size", "8")
            _type(page, "max_steps", "6")
            expect(error).to_have_count(0, timeout=120_000)
            expect(builder.get_by_text("✓ valid SFT config")).to_be_visible()
            toml = builder.locator(".primenb-toml textarea")
            expect(toml).to_have_value(_contains("max_steps = 6"), timeout=60_000)
            screenshot(page, "widgets-3-fixed")

            # launch: the monitor of the run appears under the form and follows it to the end
            builder.get_by_role("button", name="Launch").click()
            expect(builder.get_by_text("completed").first).to_be_visible(timeout=240_000)
            expect(builder.get_by_text("step 6/6").first).to_be_visible()
            builder.locator(".widget-output").last.scroll_into_view_if_needed()
            screenshot(page, "widgets-4-monitor")

            # a second run with another learning rate (typed into the TOML text this time)
            text = toml.input_value().replace("lr = 0.002", "lr = 0.001")
            toml.fill(text)
            expect(builder.get_by_text("✓ valid SFT config")).to_be_visible(timeout=120_000)
            builder.get_by_role("button", name="Launch").click()
            # two monitors (live, or already the static summary that replaces one) say completed
            ended = builder.locator(".primenb-monitor, .primenb-summary").filter(has_text="completed")
            expect(ended).to_have_count(2, timeout=240_000)

            # the harness browser refreshed by itself: two traces; select both rows, diff them
            hb = page.locator(".primenb-harness-browser")
            hb.scroll_into_view_if_needed()
            expect(hb.get_by_text("2 of 2 trace(s)")).to_be_visible(timeout=60_000)
            grid = hb.locator(".primenb-grid")
            box = grid.bounding_box()
            assert box is not None
            # a canvas grid: click the first row, shift-click the second (rows 20 px under a 20 px header);
            # again if the canvas had not painted the new rows yet when the clicks landed
            for attempt in range(3):
                page.mouse.click(box["x"] + 160, box["y"] + 30)
                page.keyboard.down("Shift")
                page.mouse.click(box["x"] + 160, box["y"] + 50)
                page.keyboard.up("Shift")
                try:
                    expect(hb.get_by_text("2 selected")).to_be_visible(timeout=60_000)
                    break
                except AssertionError:
                    if attempt == 2:
                        raise
            hb.get_by_role("button", name="Diff").click()
            expect(hb.get_by_text("optim.lr")).to_be_visible(timeout=60_000)
            hb.evaluate("el => el.scrollIntoView({block: 'start'})")
            screenshot(page, "widgets-5-harness-diff")

            # kernel shutdown: both displays become static HTML, and the saved notebook keeps it
            page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.shutdown()")
            expect(page.locator(".primenb-builder-static")).to_be_visible(timeout=60_000)
            lab_command(page, "docmanager:save")
            wait_for(
                lambda: (
                    not any(WIDGET_VIEW in o.get("data", {}) for o in saved_outputs(nb))
                    and any(
                        "primenb-builder-static" in "".join(o.get("data", {}).get("text/html", ""))
                        for o in saved_outputs(nb)
                    )
                ),
                30,
                "the saved notebook to hold the static snapshots",
            )
            screenshot(page, "widgets-6-static")

    docs_img = ROOT / "docs" / "img"
    docs_img.mkdir(parents=True, exist_ok=True)
    shutil.copy(ARTIFACTS / "widgets-2-invalid.png", docs_img / "builder.png")
    shutil.copy(ARTIFACTS / "widgets-5-harness-diff.png", docs_img / "harness-browser.png")


def _contains(text: str) -> Any:
    import re

    return re.compile(re.escape(text))
