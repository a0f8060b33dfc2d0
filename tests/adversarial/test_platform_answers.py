"""Issue 22, class "the platform's answers are input": every `prime` JSON answer is parsed into a
typed value; a shape we do not know is a clear `PrimeCLIError`, never a traceback; after the
billable launch the run id is on disk before anything else can fail; ids follow '--' in argv; a
`file://` checkpoint outside the storage cache primenb owns is refused."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.backends import answers
from primenb.backends.primecli import PrimeCLI, PrimeCLIError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
KEYS = ["run", "runId", "id", "status", "metrics", "samples", "checkpoints", "step", "storageUrl", "storage_url",
        "latest_step", "steps_with_samples", "on_demand", "onDemand", "gpuType", "teams", "started_at", "runs_ahead",
        "pricePerGpuHour", "available_now", "error_message"]  # fmt: skip


def shapes() -> st.SearchStrategy[Any]:
    """JSON values, and objects whose keys are the ones the parsers read, holding any JSON."""
    known = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6)
    nested = st.dictionaries(st.sampled_from(KEYS), known | st.lists(known, max_size=3) | json_values, max_size=6)
    return json_values | known | nested


PARSERS = [answers.run_record, answers.progress, answers.metrics, answers.samples, answers.checkpoints,
           answers.offers, answers.teams]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(shapes())
def test_platform_answers_any_shape_is_typed_or_a_clear_error(data: Any) -> None:
    for parse in PARSERS:
        try:
            parse(data)
        except PrimeCLIError as exc:
            assert "shape primenb does not know" in str(exc)
    got = answers.launched(data, "train run")  # never raises: the run may exist and bill
    assert got.run_id is None or answers.RUN_ID.match(got.run_id)


@pytest.mark.parametrize("rid", ["-x", "--force", "a b", "../x", "", "x\n", "a;b", True, 1.5, [], {}])
def test_platform_answers_run_ids_must_be_plain(rid: Any) -> None:
    with pytest.raises(PrimeCLIError):
        answers.run_id(rid, "train get")
    assert answers.launched({"run": {"runId": rid}}, "train run").run_id is None


@dataclass
class CannedCLI(PrimeCLI):
    """A `prime` that answers from a table (by subcommand), recording every argv."""

    canned: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.executable = "prime"

    def text(self, *args: str, retry: bool = True, **kw: Any) -> str:
        self.calls.append(list(args))
        answer = self.canned.get(args[1], {})
        return answer if isinstance(answer, str) else json.dumps(answer)


def _config() -> Any:
    from primenb.config import load_config

    return load_config("max_steps = 10\n[model]\nname = 'primenb/tiny-byte-xs'\n[data]\nname = 'reverse-text'\n")


@pytest.mark.parametrize(
    "answer",
    [{"run": []}, {"run": {"runId": None}}, {"run": {"runId": "-oops"}}, {"run": "r1"}, [], "Created run r1 (table)"],
)
def test_platform_answers_launch_without_an_id_says_check_train_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: Any
) -> None:
    from primenb.backends.modelfactory import ModelFactoryBackend, Quote

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    cli = CannedCLI(canned={"run": answer})
    with pytest.raises(PrimeCLIError if isinstance(answer, str) else Exception, match="prime train list") as info:
        ModelFactoryBackend(cli=cli, yes=True).launch(_config(), Quote("H100", 2.0, 1), name="r")
    from primenb.errors import PrimenbError

    assert isinstance(info.value, PrimenbError)
    status = json.loads(next(tmp_path.rglob("status.json")).read_text())
    assert status["state"] == "failed" and "prime train list" in status["error"]


def test_platform_answers_run_id_recorded_before_the_rest_of_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.backends.modelfactory import ModelFactoryBackend, Quote

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    odd = {"run": {"runId": "r-123", "gpuType": ["odd"], "pricePerGpuHour": "free"}}
    cli = CannedCLI(canned={"run": odd})
    run = ModelFactoryBackend(cli=cli, yes=True).launch(_config(), Quote("H100", 2.0, 1), name="r")
    remote = json.loads((run.dir / "remote.json").read_text())
    assert remote["run_id"] == "r-123" and remote["gpu_type"] == "H100"
    launch = cli.calls[-1]
    assert launch[launch.index("--") + 1].endswith("hosted.toml")


def test_platform_answers_ids_follow_double_dash_and_odd_answers_are_kept_as_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.backends.hosted_mirror import HostedControl
    from primenb.backends.remote import write_remote
    from primenb.protocol.rundir import RunDir

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    RunDir(run_dir).status_path.write_text(json.dumps({"state": "running"}))
    write_remote(run_dir, {"run_id": "r-1", "price_per_gpu_hour": 2.0})
    for odd in ({"run": []}, {"run": {"status": 7}}, {"run": {"status": "RUNNING", "runs_ahead": "x"}}, "not json"):
        cli = CannedCLI(canned={"get": odd, "progress": {"latest_step": "x"}})
        control = HostedControl(run_dir, cli, min_interval=0)
        control.sync(force=True)  # no traceback: the status says what the platform answered
        status = json.loads(RunDir(run_dir).status_path.read_text())
        assert status["connection"]["ok"] is False and "prime" in status["connection"]["error"], odd
    cli = CannedCLI(canned={"get": {"run": {"status": "RUNNING"}}, "progress": {"latest_step": 1}})
    control = HostedControl(run_dir, cli, min_interval=0)
    control.sync(force=True)
    control.request_stop(force=True)
    for argv in control.cli.calls:
        if argv[1] in ("get", "progress", "metrics", "rollouts", "logs", "stop", "checkpoints"):
            assert argv[-2:] == ["--", "r-1"], argv


def test_platform_answers_file_storage_outside_our_cache_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.backends.hosted_mirror import fetch_checkpoint, storage_root
    from primenb.backends.remote import write_remote
    from primenb.errors import PrimenbError

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_remote(run_dir, {"run_id": "r-1"})
    secret = tmp_path / "private"
    secret.mkdir()
    (secret / "id_rsa").write_text("KEY")
    store = storage_root()
    store.mkdir(parents=True)
    (store / "escape").symlink_to(secret)
    for url in (f"file://{secret}", str(secret), f"file://{store}/../../private", f"file://{store}/escape"):
        cli = CannedCLI(canned={"checkpoints": {"checkpoints": [{"step": 2, "status": "READY", "storageUrl": url}]}})
        with pytest.raises(PrimenbError, match="outside primenb's hosted storage"):
            fetch_checkpoint(run_dir, cli)
        assert not (run_dir / "checkpoints").exists()
    (store / "step_2").mkdir()
    cli = CannedCLI(
        canned={
            "checkpoints": {"checkpoints": [{"step": 2, "status": "READY", "storageUrl": f"file://{store}/step_2"}]}
        }
    )
    assert fetch_checkpoint(run_dir, cli).is_dir()
