"""A tracker that fails is a warning and is dropped; the others and the caller go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from primenb.trackers import TrackerSettings, open_sinks
from primenb.trackers.sinks import Fanout, Sink


class Broken(Sink):
    kind = "broken"

    def log(self, step: int, values: dict[str, float]) -> None:
        raise ConnectionError("unreachable")


class Kept(Sink):
    kind = "kept"

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, float]]] = []

    def log(self, step: int, values: dict[str, float]) -> None:
        self.rows.append((step, values))

    def location(self) -> dict[str, str]:
        return {"run_id": "r1"}


def test_a_failing_sink_is_dropped_with_a_warning_and_the_others_go_on() -> None:
    kept = Kept()
    fan = Fanout([Broken(), kept], [])
    fan.log_row({"step": 1, "time": 5.0, "phase": "rl", "loss": 0.5, "flag": True})
    fan.log_row({"step": 2, "loss": 0.25})
    assert kept.rows == [(1, {"loss": 0.5}), (2, {"loss": 0.25})]  # bookkeeping fields and bools left out
    assert len(fan.warnings) == 1 and "broken" in fan.warnings[0] and "unreachable" in fan.warnings[0]
    # the trace keeps where the working one lives, and why the failed one is off (harness show's column)
    assert fan.finish({}) == {"kept": {"run_id": "r1"}, "broken": {"warning": fan.warnings[0]}}


def test_a_bad_mlflow_uri_is_a_warning_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuchscheme://127.0.0.1:1/x")
    fan = open_sinks(["mlflow"], TrackerSettings(root=tmp_path / "t", name="n"))
    assert fan.sinks == [] and "mlflow" in fan.warnings[0]


def test_a_client_exception_mid_run_reaches_the_monitor_hook_redacted_and_bounded() -> None:
    """What the engine puts in status.json: every warning so far, the URL's password redacted."""

    class Leaky(Sink):
        kind = "leaky"

        def log(self, step: int, values: dict[str, float]) -> None:
            raise RuntimeError("POST https://me:hunter2-secret@tracker.example/api failed: " + "x" * 5000)

    seen: list[list[str]] = []
    fan = Fanout([Leaky(), Kept()], ["tracker old: could not start"])
    fan.on_warning = seen.append
    fan.log_row({"step": 1, "loss": 0.5})
    fan.log_row({"step": 2, "loss": 0.4})  # the failed sink is gone: no second warning
    assert len(seen) == 1 and seen[0][0] == "tracker old: could not start"
    msg = seen[0][1]
    assert msg.startswith("tracker leaky: log failed (RuntimeError: POST https://")
    assert "hunter2" not in msg and len(msg) < 400


def test_wandb_unreachable_logs_offline_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key in the environment but W&B unreachable (a closed port on 127.0.0.1): the run goes to
    offline files at once, without an online start first (it waited W&B's 30 s init timeout, and
    the offline run after it once lost its history under load: wandb/wandb#9865), and the
    warning says so."""
    import socket

    from tests.trackers.test_trackers import read_wandb

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    fan = open_sinks(["wandb"], TrackerSettings(root=tmp_path / "t", name="n"))
    assert [s.kind for s in fan.sinks] == ["wandb"]
    assert len(fan.warnings) == 1 and "logging offline instead" in fan.warnings[0]
    assert f"127.0.0.1:{port} is not reachable" in fan.warnings[0]
    assert "0" * 40 not in fan.warnings[0]
    fan.log_row({"step": 1, "loss": 0.5})
    fan.log_row({"step": 2, "loss": 0.25})
    where = fan.finish({})["wandb"]
    assert "url" not in where
    assert read_wandb(Path(where["folder"])) == {"loss": [(1, 0.5), (2, 0.25)]}
    assert [p.name.split("-")[0] for p in (tmp_path / "t" / "wandb").glob("*run-*")] == ["offline"]  # no online try
