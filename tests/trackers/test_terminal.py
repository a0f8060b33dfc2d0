"""What a terminal following a run (`primenb train`, `primenb attach`) says about its trackers: a
tracker's warning (status.json ``warnings``, which the monitor shows) is printed as it appears,
once; the warm-up's steps count against the warm-up's total; and `harness show`'s trackers column
says why a tracker is off."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from primenb.protocol.index import tracker_text
from primenb.render.progress import follow, progress_line
from tests.notebook.test_monitor import make_run, rl_rows, warmup_rows

W_MLFLOW = "tracker mlflow: could not start (ConnectionError: 127.0.0.1 refused); the run goes on without it"
W_WANDB = "tracker wandb: log failed (HTTPError: 500); it is off for this run"


def test_follow_prints_each_tracker_warning_as_it_appears_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    running = {"state": "running", "phase": "training", "step": 1, "warnings": [W_MLFLOW]}
    run = make_run(tmp_path / "r", running, rl_rows([0.2]))
    err: list[str] = []
    while_running: list[bool] = []

    def later() -> None:
        deadline = time.monotonic() + 30
        while not any(W_MLFLOW in e for e in err) and time.monotonic() < deadline:
            err.append(capsys.readouterr().err)
            time.sleep(0.05)
        while_running.append(any(W_MLFLOW in e for e in err))  # printed before the run ended
        status = {**json.loads((run.dir / "status.json").read_text())}
        status.update(state="completed", warnings=[W_MLFLOW, W_WANDB])  # a second one, later
        (run.dir / "status.json").write_text(json.dumps(status))

    writer = threading.Thread(target=later)
    writer.start()
    assert follow(run, every=0.0) == 0
    writer.join()
    text = "".join(err) + capsys.readouterr().err
    assert while_running == [True]
    assert text.count(W_MLFLOW) == 1 and text.count(W_WANDB) == 1  # each once, as `warning: ...`
    assert f"warning: {W_MLFLOW}" in text and f"warning: {W_WANDB}" in text


def test_warm_up_steps_count_against_the_warm_up_total() -> None:
    status = {"state": "running", "phase": "sft warmup", "step": 98, "max_steps": 4, "warmup_steps": 100}
    latest = {**warmup_rows(1)[-1], "step": 98}
    line = progress_line(status, latest)
    assert line.startswith("warm-up step 98/100 ") and "warmup/loss=" in line
    rl = progress_line({"state": "running", "phase": "training", "step": 3, "max_steps": 4}, rl_rows([0.1] * 3)[-1])
    assert rl.startswith("step 3/4 ")


def test_follow_prints_no_line_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "r", {"state": "running", "phase": "training", "step": 1}, rl_rows([0.2]))

    def finish() -> None:
        time.sleep(1.5)  # three polls with no new row
        status = json.loads((run.dir / "status.json").read_text())
        (run.dir / "status.json").write_text(json.dumps({**status, "state": "completed"}))

    t = threading.Thread(target=finish)
    t.start()
    follow(run, every=0.0)
    t.join()
    lines = [line for line in capsys.readouterr().out.splitlines() if " step " in line]
    assert len(lines) == 1, lines


def test_harness_show_says_why_a_tracker_is_off() -> None:
    where = {"tensorboard": {"folder": "/r/trackers/tensorboard"}, "mlflow": {"warning": W_MLFLOW}}
    text = tracker_text(where)
    assert text == f"tensorboard: /r/trackers/tensorboard; mlflow: {W_MLFLOW.removeprefix('tracker mlflow: ')}"
