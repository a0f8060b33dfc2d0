"""What a launch shows first, in a real ipykernel: ``run = %prime_train cfg`` answers with the line
"starting: NAME (process PID, waiting for the first step…)" before any widget model exists, and
the live monitor then takes that display's place (an update of the same display id), so a cell
shows one output, never the line and the monitor side by side."""

from __future__ import annotations

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
CONFIG = sft_toml(steps=100000, model="primenb/tiny-byte-xs", batch_size=4, seq_len=32)


def _until_idle(kc: Any, msg_id: str, timeout: float = 120) -> list[tuple[float, dict[str, Any]]]:
    """The iopub messages of one execution, each with its arrival time, until the kernel is idle."""
    out: list[tuple[float, dict[str, Any]]] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        out.append((time.monotonic(), msg))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
    raise AssertionError(f"the cell did not end within {timeout}s: {[m['msg_type'] for _, m in out]}")


def test_a_launch_shows_its_starting_line_first_then_the_monitor_in_its_place(tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    from primenb.protocol.record import read_trace
    from primenb.run import Run

    env = {**os.environ, "PRIME_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env)
    try:
        _until_idle(
            kc, kc.execute(f"%load_ext primenb\nfrom primenb import load_config\ncfg = load_config({CONFIG!r})")
        )
        sent = time.monotonic()
        messages = _until_idle(kc, kc.execute("run = %prime_train cfg --name first"))
        kinds = [m["msg_type"] for _, m in messages]
        assert "error" not in kinds, messages
        shown = [(t, m) for t, m in messages if m["msg_type"] == "display_data"]
        assert len(shown) == 1, kinds  # one output: the monitor replaces the line, not beside it
        t_line, line = shown[0]
        text = line["content"]["data"]["text/plain"]
        assert re.fullmatch(r"starting: first \(process \d+, waiting for the first step…\)", text), text
        assert WIDGET_MIME not in line["content"]["data"]
        # before any widget model: the line does not wait for ipywidgets or the monitor
        assert kinds.index("display_data") < kinds.index("comm_open"), kinds
        display_id = line["content"]["transient"]["display_id"]
        updates = [
            m
            for _, m in messages
            if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id
        ]
        assert updates and WIDGET_MIME in updates[0]["content"]["data"], kinds
        # the monitor names its run's trace: a notebook saved later gets the run's view as of then
        mark = updates[0]["content"]["metadata"]["primenb"]
        trace = (read_trace(tmp_path / "outputs" / "first") or {}).get("trace_id")
        assert trace and mark == {"snapshot": True, "trace": trace}, mark
        print(f"first display after {t_line - sent:.2f}s, cell done after {messages[-1][0] - sent:.2f}s")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        for run_dir in (tmp_path / "outputs").glob("*"):
            Run(run_dir).stop(timeout=60)
