"""Items 7, 8, 10 and 12: process control never touches a process that is not the run's, one
launch owns a run directory, a read-only run directory is a message, and Ctrl-C detaches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from primenb.errors import PrimenbError
from primenb.protocol.liveness import group_alive, launch_record
from tests.adversarial.conftest import rl_text

pytestmark = pytest.mark.slow  # real engines killed, raced and stopped


def _running_run(root: Path, launcher: dict[str, object]) -> Path:
    run = root / "outputs" / "r"
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "resolved.json").write_text("{}")
    (run / "status.json").write_text(json.dumps({"state": "running", "step": 4, "max_steps": 10}))
    (run / "launcher.json").write_text(json.dumps(launcher))
    return run


def test_item07_stop_never_kills_a_reused_pgid(home: Path) -> None:
    from primenb.run import Run

    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)  # got "our" old pgid
    try:
        record = launch_record(stranger.pid)
        record["start_time"] = int(record["start_time"] or 0) - 12345  # ours started at another time
        run = _running_run(home, record)
        assert group_alive(record) is False
        r = Run(run)
        assert r.state == "failed"  # attach no longer waits forever
        assert r.stop(force=True, wait=False) == "failed"
        assert stranger.poll() is None  # the unrelated group was not signalled
    finally:
        stranger.kill()
        stranger.wait()


def test_item07_the_real_group_is_still_stoppable(home: Path) -> None:
    from primenb.protocol.liveness import signal_group

    own = subprocess.Popen(["sleep", "60"], start_new_session=True)
    record = launch_record(own.pid)
    assert group_alive(record) is True
    assert signal_group(record, signal.SIGKILL)
    assert own.wait(timeout=120) == -signal.SIGKILL


def test_item08_one_launch_per_run_name(home: Path) -> None:
    from primenb.backends.local import prepare
    from primenb.config import load_config

    config = load_config(rl_text(max_steps=2))
    for attempt in range(10):
        name = f"race-{attempt}"
        barrier = threading.Barrier(2)
        results: list[object] = []

        def launch(name: str = name, barrier: threading.Barrier = barrier, results: list[object] = results) -> None:
            barrier.wait()
            try:
                results.append(prepare(config, name=name))
            except PrimenbError as exc:
                results.append(exc)

        threads = [threading.Thread(target=launch) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(isinstance(r, Path) for r in results) == 1, results
        assert any("already holds a run" in str(r) for r in results)


def test_item10_read_only_run_directory_is_reported(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine died while its folder was read-only: status.json still says running. Reading,
    refreshing and stopping say failed, without a traceback (simulated: the tests may run as root)."""
    import primenb.run as run_mod
    from primenb.run import Run

    dead = subprocess.Popen(["true"], start_new_session=True)
    record = launch_record(dead.pid)
    dead.wait()
    run = _running_run(home, record)

    def read_only(*a: object, **k: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(run_mod, "atomic_write_json", read_only)
    monkeypatch.setattr(Path, "touch", read_only)
    r = Run(run)
    status = r.refresh()
    assert status["state"] == "failed" and "could not be updated" in status["error"]
    assert r.stop(wait=False) == "failed"
    assert json.loads((run / "status.json").read_text())["state"] == "running"  # nothing was written


def test_item10_engine_status_writes_never_raise(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import primenb.protocol.rundir as rundir

    def read_only(*a: object, **k: object) -> None:
        raise PermissionError(13, "Permission denied")

    status = rundir.StatusFile(rundir.RunDir(home))
    monkeypatch.setattr(rundir, "atomic_write_json", read_only)
    status.update(step=3)
    status.finish("failed", error="x")
    assert status.data["state"] == "failed"


def test_item12_ctrl_c_in_attach_detaches(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from primenb.render import progress

    calls: list[str] = []

    class FakeRun:
        name = "r"
        dir = home

        def stop(self, **k: object) -> str:
            calls.append("stop")
            return "stopped"

        def refresh(self) -> dict[str, str]:
            return {"state": "stopped"}

    def interrupted(run: object, every: float, *_: object) -> int:
        raise KeyboardInterrupt

    original = progress._follow
    progress._follow = interrupted  # type: ignore[assignment]
    try:
        assert progress.follow(FakeRun(), grace_s=0.01) == 0  # type: ignore[arg-type]
        assert calls == [] and "detached" in capsys.readouterr().out
        progress.follow(FakeRun(), stop_on_interrupt=True)  # type: ignore[arg-type]
        assert calls == ["stop"]
    finally:
        progress._follow = original  # type: ignore[assignment]
    assert os.path.isdir(home)


def test_item12_cli_attach_has_stop_flag() -> None:
    from primenb.cli import build_parser

    assert build_parser().parse_args(["attach", "r", "--stop"]).stop is True
    assert build_parser().parse_args(["attach", "r"]).stop is False
