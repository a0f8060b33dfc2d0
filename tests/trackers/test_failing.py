"""A tracker that fails is a warning in the monitor and the run completes: a real tiny run with
an unreachable MLflow server and a trackio folder that cannot be made, TensorBoard working beside
them. Nothing reaches the network (the MLflow URL is a closed port on 127.0.0.1)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from primenb.protocol.rundir import RunDir
from primenb.run import Run
from tests.engine.conftest import engine_env, run_engine, sft_config, write_run
from tests.trackers.test_trackers import expected, read_tensorboard, same

pytestmark = pytest.mark.slow


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("failing")
    (base / "a-file").write_text("not a folder")
    cfg = sft_config(max_steps=4)
    cfg["primenb"].update(logging_steps=1, report_to=["mlflow", "trackio", "tensorboard"])
    cfg["eval"].update(interval=4, num_examples=4)
    cfg["run"]["name"] = "failing-trackers"
    run_dir = write_run(base / "failing-trackers", cfg)
    env = engine_env()
    env.pop("WANDB_API_KEY", None)
    env.update(
        MLFLOW_TRACKING_URI=f"http://127.0.0.1:{closed_port()}",  # unreachable: connection refused
        TRACKIO_DIR=str(base / "a-file" / "trackio"),  # cannot be made: a file is in the way
    )
    proc = run_engine(run_dir, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def status(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "status.json").read_text())


def test_the_run_completes_and_status_says_which_trackers_failed(run: Path) -> None:
    st = status(run)
    assert st["state"] == "completed" and st["step"] == 4
    warnings = st["warnings"]
    assert [w.split(":")[0] for w in warnings] == ["tracker mlflow", "tracker trackio"]
    assert "127.0.0.1" in warnings[0] and "Not a directory" in warnings[1]
    assert all(len(w) <= 400 for w in warnings)
    # the working tracker went on: every stored scalar is in TensorBoard, and the trace says where
    where = json.loads((run / "trace.json").read_text())["trackers"]
    assert set(where) == {"tensorboard", "mlflow", "trackio"}
    # the failed ones: why they are off (harness show's trackers column), nothing else
    assert where["mlflow"] == {"warning": warnings[0]} and where["trackio"] == {"warning": warnings[1]}
    same(read_tensorboard(Path(where["tensorboard"]["folder"])), expected(run))


def test_no_traceback_anywhere(run: Path) -> None:
    log = RunDir(run).log_path.read_text()
    for text in ((run / "engine.stdout.txt").read_text(), log):
        assert "Traceback" not in text
    assert "tracker mlflow: could not start" in log


def test_the_monitor_shows_the_warnings(run: Path, shell: Any) -> None:
    from primenb.notebook.monitor import Monitor
    from primenb.render.summary import run_html

    monitor = Monitor(Run(run))
    assert monitor.poll()  # the run has ended
    live = monitor.warnings.value
    assert live.count('class="primenb-warning"') == 2
    assert "tracker mlflow: could not start" in live and "tracker trackio: could not start" in live
    static = run_html(Run(run))  # what replaces the widget, and what a saved notebook keeps
    assert "tracker mlflow: could not start" in static and "tracker trackio: could not start" in static


def test_primenb_attach_prints_the_tracker_warnings(run: Path) -> None:
    """The terminal says what the monitor says: `primenb attach` on the finished run prints each
    tracker's warning once, as `warning: ...` on stderr."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "primenb.cli", "attach", str(run)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for warning in status(run)["warnings"]:
        assert proc.stderr.count(f"warning: {warning}") == 1
    assert "tracker mlflow: could not start" in proc.stderr and "Traceback" not in proc.stderr
