"""Kernel -> Restart while a run's live monitor is shown, in JupyterLab and in Notebook 7.

The run goes on in its own process, but the thread that fed the view dies with the kernel and the
page drops the old kernel's last messages: without the labextension's notice the view stayed at
"running" with a Stop button wired to nothing. The test restarts the kernel through the UI (the
command and its confirmation dialog), then checks that the old view says what happened and how to
follow the run again, that its Stop button is disabled, that the run still runs, and that
``%prime_train --attach`` in a new cell brings up a live monitor without the notice, that the
notice's text reads at 4.5:1 or more in the light and the dark theme (it was 1.2:1 in the dark), and that the
saved notebook's first view says what the run did, not the "queued" of its first display.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from primenb.run import Run
from tests.jupyterlab import (
    WIDGET_VIEW,
    chromium_page,
    jupyterlab,
    kernel_idle,
    lab_command,
    open_notebook,
    require_ui,
    screenshot,
    set_theme,
    stop_runs,
    text_contrasts,
    write_notebook,
)
from tests.polling import wait_for
from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # a JupyterLab (or Notebook 7), Chromium and a real tiny run

RUN = "restart-me"
CONFIG = sft_toml(steps=100000, model="primenb/tiny-byte-xs", batch_size=4, seq_len=32)
CELLS = ["%load_ext primenb", f"%%rltoml cfg\n{CONFIG}", f"run = %prime_train cfg --name {RUN}"]
NOTICE = (
    "The kernel restarted; this view no longer updates. The run continues: "
    f"%prime_train --attach {RUN} in a new cell shows it again."
)
# every monitor on the page: its notice (or null) and whether its Stop button still answers
MONITORS = """() => [...document.querySelectorAll('.primenb-monitor')].map(m => ({
  notice: m.querySelector('.primenb-kernel-notice')?.textContent ?? null,
  stop: m.querySelector('button.primenb-stop')?.disabled ?? null,
  reattach: m.querySelector('.primenb-reattach')?.offsetParent !== null,
  counting: /step \\d+\\//.test(m.querySelector('.primenb-phase-text')?.textContent ?? ''),
  disconnected: [m, ...m.querySelectorAll('*')].filter(e => e.classList.contains('jupyter-widgets-disconnected')).length,
  // ipywidgets' red broken-link icon (a ::before) on a disconnected widget: none in a monitor
  icons: [m, ...m.querySelectorAll('.jupyter-widgets-disconnected')]
    .filter(e => e.classList.contains('jupyter-widgets-disconnected'))
    .filter(e => !['none', 'normal'].includes(getComputedStyle(e, '::before').content)).length,
}))"""


def _restart_through_the_ui(page: Any) -> None:
    from playwright.sync_api import expect

    lab_command(page, "notebook:restart-kernel", wait=False)
    accept = page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept")
    expect(accept).to_be_visible(timeout=120_000)
    accept.click()


def _run_in_new_cell(page: Any, source: str) -> None:
    lab_command(page, "notebook:insert-cell-below")
    page.evaluate(
        "(s) => window.jupyterapp.shell.currentWidget.content.activeCell.model.sharedModel.setSource(s)", source
    )
    lab_command(page, "notebook:run-cell", wait=False)


@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_a_restart_leaves_a_notice_and_a_disabled_stop(tmp_path: Path, app: str) -> None:
    require_ui()
    with jupyterlab(tmp_path, tmp_path / "home", app=app) as server:
        write_notebook(server.root / "restart.ipynb", CELLS)
        status = server.root / "outputs" / RUN / "status.json"
        try:
            with chromium_page(1200, 1200) as page:
                open_notebook(page, server, "restart.ipynb")
                lab_command(page, "notebook:run-all-cells", wait=False)
                wait_for(
                    lambda: any(m["counting"] for m in page.evaluate(MONITORS)),
                    240,
                    "the live monitor to count steps",
                )
                (before,) = page.evaluate(MONITORS)
                assert before["notice"] is None and before["stop"] is False and before["reattach"], before

                _restart_through_the_ui(page)
                (after,) = wait_for(
                    lambda: [m for m in page.evaluate(MONITORS) if m["notice"]], 60, "the kernel-restart notice"
                )
                assert after["notice"] == NOTICE, after
                # ipywidgets marks the view's widgets disconnected: the view shows paused, no red icons
                (after,) = wait_for(
                    lambda: [m for m in page.evaluate(MONITORS) if m["disconnected"]], 60, "the widgets' disconnect"
                )
                assert after["icons"] == 0, after
                assert after["stop"] is True, after  # the dead Stop button cannot be clicked
                assert not after["reattach"], after  # the notice replaces the "if this kernel restarts" line
                assert json.loads(status.read_text())["state"] == "running"  # the run goes on
                monitor = page.locator(".primenb-monitor").first
                monitor.scroll_into_view_if_needed()
                screenshot(page, f"kernel-restart-notice-{app}")
                if app == "jupyterlab":  # the notice's text readable in both themes (Notebook 7: the same style)
                    notice = ".primenb-kernel-notice, .primenb-kernel-notice code"
                    light = text_contrasts(page, notice)
                    set_theme(page, "JupyterLab Dark", light=False)
                    dark = text_contrasts(page, notice)
                    screenshot(page, "kernel-restart-notice-dark")
                    set_theme(page, "JupyterLab Light", light=True)
                    assert len(light) >= 2 and min(light) >= 4.5 and min(dark) >= 4.5, (light, dark)

                # the command the notice gives follows the run again, in a view without the notice
                wait_for(lambda: kernel_idle(page), 120, "the restarted kernel")
                _run_in_new_cell(page, f"%load_ext primenb\n%prime_train --attach {RUN}")

                def two_views() -> list[dict[str, Any]] | None:
                    views = page.evaluate(MONITORS)
                    return views if len(views) == 2 and views[1]["counting"] else None

                views = wait_for(two_views, 120, "a second, live monitor from --attach")
                assert views[0]["notice"] == NOTICE and views[0]["stop"] is True, views
                assert views[1]["notice"] is None and views[1]["stop"] is False, views

                # saved, the first cell keeps the run's view as of the save (it kept the "queued" of
                # its first display), and once the run has ended, its final state
                lab_command(page, "docmanager:save")
                saved = _first_view(server.root / "restart.ipynb")
                assert "running" in saved and "queued" not in saved, saved
                Run(status.parent).stop(timeout=60)
                lab_command(page, "docmanager:save")
                assert "stopped at step" in _first_view(server.root / "restart.ipynb")
        finally:
            stop_runs(server.root)


def _first_view(path: Path) -> str:
    """The saved text/html of the launch cell's output (the third cell)."""
    (output,) = json.loads(path.read_text())["cells"][2]["outputs"]
    assert WIDGET_VIEW not in output["data"], output  # no view that could not come back
    return str(output["data"]["text/html"])
