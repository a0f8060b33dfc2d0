"""A real ipykernel shutting down while a run's live monitor is shown: before it goes, the monitor
sends an ``update_display_data`` that replaces the widget with the static summary (no widget mime
type), so the notebook a frontend then saves shows the run instead of a missing widget model."""

from __future__ import annotations

import json
import os
import queue
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # a real kernel and a real (tiny) run

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _messages(kc: Any, until: float) -> list[dict[str, Any]]:
    out = []
    while time.monotonic() < until:
        try:
            out.append(kc.get_iopub_msg(timeout=0.5))
        except queue.Empty:
            continue
    return out


def test_shutdown_replaces_the_live_widget_with_the_summary(tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    from primenb.run import Run

    config = sft_toml(steps=100000, model="primenb/tiny-byte-xs", batch_size=4, seq_len=32)
    env = {**os.environ, "PRIME_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env)
    try:
        code = (
            "%load_ext primenb\nfrom primenb import load_config\n"
            f"cfg = load_config({config!r})\nrun = %prime_train cfg --name live"
        )
        kc.execute(code)
        shown = None
        end = time.monotonic() + 120
        while shown is None and time.monotonic() < end:
            for msg in _messages(kc, time.monotonic() + 1):
                # the launch's starting line comes first; the monitor takes its place (same display id)
                kind = msg["msg_type"]
                if kind in ("display_data", "update_display_data") and WIDGET_MIME in msg["content"]["data"]:
                    shown = msg["content"]["transient"]["display_id"]
        assert shown, "the live monitor was not displayed"
        run = Run(tmp_path / "outputs" / "live")
        end = time.monotonic() + 180
        while not run.metric_rows() and time.monotonic() < end:
            time.sleep(0.5)
        kc.shutdown()
        updates = [
            m["content"]
            for m in _messages(kc, time.monotonic() + 10)
            if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == shown
        ]
        assert updates, "no update of the monitor's display before the kernel went"
        last = updates[-1]["data"]
        assert WIDGET_MIME not in last
        assert "primenb-summary" in last["text/html"] and "%prime_train --attach live" in re.sub(
            r"<[^>]+>", "", last["text/html"]
        )
        assert str(tmp_path) not in json.dumps(last)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        for run_dir in (tmp_path / "outputs").glob("*"):
            Run(run_dir).stop(timeout=60)
