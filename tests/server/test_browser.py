"""The sidebar in a real JupyterLab and a real (headless, system) Chromium, driven by Playwright.

JupyterLab runs on 127.0.0.1 (random port, token auth) with the extension and the server config
taken from the built wheel. The test starts a long tiny run and watches it appear with a growing
sparkline, opens its detail (which polls in place), stops it with a normal click on the detail's
Stop button, sees the detail and the row end, applies a finished trace from the panel and sees the child run.
Screenshots go to ``$PRIMENB_TEST_ARTIFACTS`` (default ``test-artifacts/``) and docs/img/sidebar.png.

Needs the system Chromium (``apt-get install chromium``) and Playwright (never its own browser
download); skipped without them unless ``PRIMENB_REQUIRE_UI=1`` (CI), where their absence fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.jupyterlab import ARTIFACTS, CHROMIUM, ROOT, jupyterlab, lab_env, require_ui
from tests.polling import wait_for
from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # JupyterLab + Chromium + a real tiny run


def sft(steps: int, ckpt: int, out: str) -> str:
    return sft_toml(
        steps=steps,
        model="primenb/tiny-byte-xs",
        batch_size=8,
        seq_len=48,
        lr=2e-3,
        ckpt_interval=ckpt,
        primenb="seed = 1\nlogging_steps = 1\nsample_every = 5",
    ).replace("max_steps", f'output_dir = "{out}"\nmax_steps', 1)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_ui()
    tmp = tmp_path_factory.mktemp("lab")
    home, out = tmp / "home", tmp / "runs"
    env = lab_env(tmp, home)
    # the runs: a finished one to apply, then a long one to watch and stop (its own PRIME_HOME)
    old = {k: os.environ.get(k) for k in ("PRIME_HOME", "HF_HUB_OFFLINE", "OMP_NUM_THREADS")}
    os.environ.update(PRIME_HOME=str(home), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    from primenb import load_config
    from primenb.backends import submit

    started: list[Any] = []
    try:
        parent = submit(load_config(sft(4, 4, out)), name="ui-parent")
        started.append(parent)
        assert parent.wait(timeout=300) == "completed", parent.logs()
        long = submit(load_config(sft(100000, 100000, out)), name="ui-long")
        started.append(long)
        with jupyterlab(tmp, home, env) as server:
            yield {"base": server.base, "token": server.token, "parent": parent, "long": long, "tmp": tmp}
    finally:
        from primenb.backends import open_run
        from primenb.protocol.index import Index

        for row in Index().query("SELECT run_dir FROM traces WHERE status IN ('queued', 'running')"):
            open_run(row[0]).stop(timeout=60, force=False)
        for run in started:
            run.stop(timeout=60)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _api(lab: dict[str, Any], path: str) -> Any:
    req = urllib.request.Request(
        f"{lab['base']}/primenb/api/{path}", headers={"Authorization": f"token {lab['token']}"}
    )
    return json.loads(urllib.request.urlopen(req, timeout=10).read())


def test_sidebar_live_run_stop_and_apply(lab: dict[str, Any]) -> None:
    from playwright.sync_api import expect, sync_playwright

    from primenb.traces.trace import get

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    long_id, parent_id = get(lab["long"]).id, get(lab["parent"]).id
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{lab['base']}/lab?token={lab['token']}")
            tab = page.locator('.jp-SideBar [data-id="primenb-runs"]')
            tab.wait_for(timeout=120_000)
            tab.click()
            panel = page.locator("#primenb-runs")
            expect(panel.locator(".primenb-title")).to_have_text("Prime runs")
            long_row = panel.locator(f'.primenb-run[data-trace="{long_id}"]')
            expect(long_row).to_be_visible(timeout=120_000)
            expect(panel.locator(f'.primenb-run[data-trace="{parent_id}"]')).to_have_attribute(
                "data-state", "completed"
            )
            spark = long_row.locator("svg.primenb-spark")

            def points() -> int:
                return int(spark.get_attribute("data-points") or 0) if spark.count() else 0

            first = wait_for(lambda: points() >= 3 and points(), 240, "the sparkline to show 3 points")
            page.screenshot(path=str(ARTIFACTS / "sidebar-live.png"))
            wait_for(lambda: points() > first, 120, "the sparkline to grow")
            page.screenshot(path=str(ARTIFACTS / "sidebar.png"))
            docs_img = ROOT / "docs" / "img"
            docs_img.mkdir(parents=True, exist_ok=True)
            shutil.copy(ARTIFACTS / "sidebar.png", docs_img / "sidebar.png")

            # its detail, live: the steps it has run (not "0 → None"), read again at every poll
            # without rebuilding what did not change, so a normal click on Stop lands
            long_row.locator(".primenb-name").click()
            detail = panel.locator(".primenb-detail")
            steps = detail.locator("table.primenb-kv tr", has=page.locator("th", has_text="steps")).locator("td")
            expect(steps).to_have_text(re.compile(r"^0 → \d+( so far)? \(max 100000\)$"), timeout=60_000)
            chart = detail.locator("svg.primenb-chart-loss")
            expect(chart).to_be_visible(timeout=60_000)
            stop = detail.locator('[data-section="actions"] button[data-action="stop"]')
            stop.evaluate("b => { b.dataset.kept = 'yes'; }")  # the node, not one built anew
            grown = int(chart.get_attribute("data-points") or 0)
            wait_for(lambda: int(chart.get_attribute("data-points") or 0) > grown, 60, "the detail to poll")
            first_steps = steps.text_content()
            wait_for(lambda: steps.text_content() != first_steps, 60, "the detail's steps to move on")
            assert stop.get_attribute("data-kept") == "yes"  # polled twice, the same Stop button
            stop.click(timeout=60_000)  # a normal click (actionability checks), while it polls
            badge = detail.locator(".primenb-detail-head .primenb-badge")
            expect(badge).to_have_text("stopped", timeout=180_000)  # the detail ends in place
            assert lab["long"].wait(timeout=300) == "stopped"
            page.screenshot(path=str(ARTIFACTS / "sidebar-stopped.png"))
            detail.locator('button[data-action="back"]').click()
            expect(long_row).to_have_attribute("data-state", "stopped", timeout=60_000)
            # the row ends with the run's stored final loss, not the poll before it ended
            final = next(i for i in _api(lab, "traces")["items"] if i["trace"] == long_id)["final_loss"]
            expect(long_row.locator(".primenb-meta")).to_contain_text(f"loss {final:.3f}", timeout=120_000)

            # apply the finished trace from the panel: a dialog, 2 steps, the child appears
            # a row's actions show on hover (hidden, they take no width): a person points at the row first
            parent_row = panel.locator(f'.primenb-run[data-trace="{parent_id}"]')
            parent_row.hover()
            parent_row.locator('button[data-action="apply"]').click()
            dialog = page.locator(".jp-Dialog")
            dialog.locator("input.primenb-apply-steps").fill("2")
            page.screenshot(path=str(ARTIFACTS / "sidebar-apply-dialog.png"))
            dialog.locator("button.jp-mod-accept").click()
            child = wait_for(
                lambda: next((i for i in _api(lab, "traces")["items"] if i["parent"] == parent_id), None),
                180,
                "the applied child trace",
            )
            expect(panel.locator(f'.primenb-run[data-trace="{child["trace"]}"]')).to_be_visible(timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "sidebar-applied.png"))
            detail = _api(lab, f"traces/{child['trace']}")
            assert [e["trace"] for e in detail["lineage"]] == [parent_id, child["trace"]]
        finally:
            browser.close()
