"""The Model Factory backend driving the real `prime` CLI (0.18.0) against a stand-in platform on
127.0.0.1 (`fake_platform.py`): launch with a confirmation, QUEUED -> RUNNING -> COMPLETED into the
run directory, stop, pause/resume as a child trace, 401/402/422/500, and the API key nowhere."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from primenb.backends.hosted_rules import hosted_report
from primenb.backends.modelfactory import HostedConfigError, LaunchCancelled, ModelFactoryBackend, fetch_checkpoint
from primenb.backends.primecli import AuthError, BillingError, CLIMissing, NotJSON, PrimeCLI, find_prime
from primenb.config import load_config
from primenb.errors import PrimenbError
from primenb.protocol.record import read_trace
from primenb.run import Run
from tests.backends.fake_platform import PRICE, RUNNING_ON, FakePlatform
from tests.tiny import rl_toml

ROOT = Path(__file__).resolve().parents[2]
HOSTED_RL = rl_toml(model="primenb/tiny-byte-xs", extra="[inference]\n")


def require_prime() -> str:
    found = find_prime()
    if found is None:  # a test dependency (the `test` extra): missing must fail, not skip
        pytest.fail("the `prime` CLI is not installed: pip install 'prime==0.18.0' (the test extra)")
    return found


@pytest.fixture
def platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePlatform]:
    require_prime()
    key = "pit_" + secrets.token_hex(20)
    fake = FakePlatform(key).start()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the CLI's ~/.prime lives here
    monkeypatch.setenv("PRIME_API_KEY", key)
    monkeypatch.setenv("PRIME_API_BASE_URL", fake.url)
    for name in ("PRIME_TEAM_ID", "PRIME_BASE_URL", "PRIME_CONTEXT", "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_" + secrets.token_hex(8))  # forwarded by name only
    monkeypatch.chdir(tmp_path)
    yield fake
    fake.stop()


def backend(**kw: object) -> ModelFactoryBackend:
    kw.setdefault("min_interval", 1e9)  # reads never sync on their own: `tick` moves the platform on
    cli = PrimeCLI(backoff=0.05)
    return ModelFactoryBackend(cli=cli, **kw)  # type: ignore[arg-type]


def tick(run: Run) -> dict[str, Any]:
    """One poll of the platform (one step of its script), as the monitor's refresh does."""
    run._control.sync(force=True)  # type: ignore[union-attr]
    return run.files.read_status()


def scan_for(secret: str, *roots: Path) -> list[str]:
    """Every file under ``roots`` holding ``secret``."""
    hits = []
    for root in roots:
        for path in root.rglob("*") if root.is_dir() else [root]:
            if path.is_file() and secret.encode() in path.read_bytes():
                hits.append(str(path))
    return hits


def test_launch_asks_then_follows_queued_running_completed(platform: FakePlatform, tmp_path: Path) -> None:
    quotes = []
    mf = backend(gpu_type="H200_141GB", confirm=lambda q: quotes.append(q) or True)
    run = mf.submit(load_config(HOSTED_RL), name="hosted-a")

    # the question came first, with the platform's price for the chosen GPU type
    assert len(quotes) == 1 and quotes[0].gpu_type == "H200_141GB" and quotes[0].price_per_gpu_hour == PRICE
    assert quotes[0].gpus == 2 and f"${PRICE * 2:.2f}/hour" in quotes[0].text()
    launched = [r for r in platform.requests if r["path"] == "/api/v1/training/runs"]
    assert len(launched) == 1 and launched[0]["authorized"]
    sent = launched[0]["body"]
    assert "primenb" not in sent["config"] and sent["gpuType"] == "H200_141GB"
    assert sent["hfToken"] == os.environ["HF_TOKEN"]  # the one forwarded secret, read by the CLI itself
    assert run.status["state"] == "queued"

    status = tick(run)  # QUEUED, two runs ahead
    assert status["state"] == "queued" and status["queue"] == {
        "position": 2,
        "reason": "waiting for H200_141GB capacity",
    }
    assert "2 run(s) ahead" in status["note"]

    status = tick(run)  # RUNNING at step 2
    assert status["state"] == "running" and status["step"] == 2
    assert [r["step"] for r in run.metric_rows()] == [1, 2]
    assert run.metric_rows()[-1]["reward"] == pytest.approx(0.2)
    assert "cost" in status and status["cost"]["per_hour"] == pytest.approx(PRICE * 2) and "so far" in status["note"]
    assert list(run.samples["step"]) == [2] and run.samples["completion"][0] == "2cba"  # the newest step's rollouts

    status = tick(run)  # COMPLETED at step 4
    assert status["state"] == "completed"
    assert [r["step"] for r in run.metric_rows()] == [1, 2, 3, 4]
    # metrics came incrementally: from step 1, then only what was new
    asked = [r["query"].get("min_step") for r in platform.requests if r["path"].endswith("/metrics")]
    assert asked == ["1", "3"]
    assert "[trainer] step 4 done" in (run.dir / "logs" / "trainer.log").read_text()
    assert "==> orchestrator <==" in run.logs(50)
    trace = read_trace(run.dir)
    assert trace is not None and trace["status"] == "completed" and trace["backend"] == "modelfactory"
    hosted = trace["hosted"]
    assert hosted["run_id"] and hosted["gpu_type"] == "H200_141GB" and hosted["dashboard"].endswith(hosted["run_id"])

    # nothing we keep holds the key: run directory, harness store, the CLI's logs and outputs
    key = os.environ["PRIME_API_KEY"]
    assert scan_for(key, tmp_path / "outputs", Path(os.environ["PRIME_HOME"])) == []
    assert scan_for(os.environ["HF_TOKEN"], tmp_path / "outputs") == []
    assert all(r["authorized"] for r in platform.requests)

    # primenb.load / generate on the trace fetch its latest READY checkpoint: here it is on the
    # platform's storage, which this machine cannot read, and the error says so...
    from primenb.harness.inference import trained

    with pytest.raises(PrimenbError, match="cannot read the platform's storage"):
        trained(trace["trace_id"])
    # ...unless it can (a file:// URL in the storage cache primenb owns): then the latest READY one
    # is copied to checkpoints/step_N; a file:// URL anywhere else is refused
    from primenb.backends.hosted_mirror import storage_root

    for r in platform.runs.values():
        r.storage = f"file://{tmp_path}/step_{{step}}"
    (tmp_path / "step_4").mkdir()
    with pytest.raises(PrimenbError, match="outside primenb's hosted storage"):
        trained(trace["trace_id"])
    store = storage_root()
    for step in (2, 4):
        (store / f"step_{step}").mkdir(parents=True)
    (store / "step_4" / "adapter_config.json").write_text("{}")
    for r in platform.runs.values():
        r.storage = f"file://{store}/step_{{step}}"
    got = trained(trace["trace_id"]).checkpoint
    assert got == run.dir / "checkpoints" / "step_4" and (got / "adapter_config.json").exists()
    assert run.checkpoints == [got] and run.status["final_checkpoint"] == str(got)


def test_no_answer_no_launch(platform: FakePlatform) -> None:
    with pytest.raises(LaunchCancelled, match="pass --yes"):
        backend().submit(load_config(HOSTED_RL), name="never")
    with pytest.raises(LaunchCancelled, match="cancelled"):
        backend(confirm=lambda q: False).submit(load_config(HOSTED_RL), name="never2")
    assert "/api/v1/training/runs" not in platform.paths("POST")


def test_stop(platform: FakePlatform) -> None:
    platform.script = RUNNING_ON
    run = backend(yes=True, team="team_fake").submit(load_config(HOSTED_RL), name="to-stop")
    # the chosen team reached the platform through PRIME_TEAM_ID in the CLI's environment only
    assert [r["body"]["teamId"] for r in platform.requests if r["path"] == "/api/v1/training/runs"] == ["team_fake"]
    assert "PRIME_TEAM_ID" not in os.environ and read_trace(run.dir)["hosted"]["team"] == "team_fake"  # type: ignore[index]
    assert tick(run)["state"] == "queued"  # a queued run stops too (and is never billed)
    # after a kernel restart: found again by its name or its platform run id, wired to the platform
    from primenb.backends import attach
    from primenb.backends.modelfactory import HostedControl

    run_id = run.status["hosted"]["run_id"]
    for ref in ("to-stop", run_id):
        again = attach(ref)
        assert again.dir == run.dir and isinstance(again._control, HostedControl) and again._control.run_id == run_id
    assert run.stop(wait=True, timeout=60) == "stopped"
    assert any(p.endswith("/stop") for p in platform.paths("PUT"))
    assert read_trace(run.dir)["status"] == "stopped"  # type: ignore[index]


def test_live_logs_are_pulled_every_log_every_polls_while_running(
    platform: FakePlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.backends import hosted_mirror

    monkeypatch.setattr(hosted_mirror, "LOG_EVERY", 2)
    platform.script = (RUNNING_ON[0], *({"status": "RUNNING", "step": s} for s in (1, 2, 3)))
    run = backend(yes=True).submit(load_config(HOSTED_RL), name="live-logs")
    trainer_log = run.dir / "logs" / "trainer.log"

    def log_calls() -> int:
        return sum(1 for r in platform.requests if r["path"].endswith("/logs"))

    assert tick(run)["state"] == "queued" and log_calls() == 0  # a queued run has no logs to read
    assert tick(run)["step"] == 1  # 2nd poll: both components' logs, as they are now
    assert log_calls() == 2 and "[trainer] step 1 done" in trainer_log.read_text()
    assert "==> orchestrator <==" in run.logs(50)
    assert tick(run)["step"] == 2 and log_calls() == 2  # 3rd poll: not a log poll
    assert "step 2 done" not in trainer_log.read_text()
    assert tick(run)["step"] == 3 and log_calls() == 4  # 4th poll: fresh logs
    assert "[trainer] step 3 done" in trainer_log.read_text()
    assert run.stop(wait=True, timeout=60) == "stopped"


def test_pause_then_resume_is_a_child_trace(platform: FakePlatform) -> None:
    platform.script = RUNNING_ON
    mf = backend(yes=True)
    run = mf.submit(load_config(HOSTED_RL), name="to-pause")
    tick(run)
    tick(run)
    assert run._control.pause() == "PAUSED"  # type: ignore[union-attr]
    assert run.status["state"] == "stopped" and run.status["paused"] is True
    child = mf.resume(run, name="resumed")
    parent_trace, child_trace = read_trace(run.dir), read_trace(child.dir)
    assert child_trace["parent"] == parent_trace["trace_id"]  # type: ignore[index]
    assert child_trace["hosted"]["resumed_from"] == parent_trace["hosted"]["run_id"]  # type: ignore[index]
    assert any(p.endswith("/resume") for p in platform.paths("POST"))
    assert tick(child)["state"] == "queued"

    # %prime_harness apply on the paused trace: a billed continuation, so only with --yes
    import primenb.harness as h

    with pytest.raises(LaunchCancelled, match="pass --yes"):
        h.apply(parent_trace["trace_id"], steps=2)  # type: ignore[index]
    applied = h.apply(parent_trace["trace_id"], steps=2, yes=True, name="applied")  # type: ignore[index]
    sent = [r["body"] for r in platform.requests if r["path"] == "/api/v1/training/runs"][-1]
    assert sent["resumeFrom"] == parent_trace["hosted"]["run_id"] and sent["config"]["max_steps"] == 3  # type: ignore[index]
    assert read_trace(applied.dir)["parent"] == parent_trace["trace_id"]  # type: ignore[index]


def test_401_402_at_launch_are_clear_and_recorded(platform: FakePlatform) -> None:
    platform.fail(r"^/api/v1/training/runs$", 401, method="POST")
    with pytest.raises(AuthError, match="prime login") as exc:
        backend(yes=True).submit(load_config(HOSTED_RL), name="unauth")
    assert os.environ["PRIME_API_KEY"] not in str(exc.value)
    assert "401" in load_status("unauth")["error"] and load_status("unauth")["state"] == "failed"
    platform.fail(r"^/api/v1/training/runs$", 402, method="POST")
    with pytest.raises(BillingError, match="billing"):
        backend(yes=True).submit(load_config(HOSTED_RL), name="unpaid")


def load_status(name: str) -> dict[str, object]:
    import json

    return json.loads((Path("outputs") / name / "status.json").read_text())


def test_401_while_watching_keeps_the_run(platform: FakePlatform) -> None:
    run = backend(yes=True).submit(load_config(HOSTED_RL), name="watch-401")
    platform.fail(r"^/api/v1/rft/runs/[^/]+$", 401)
    status = tick(run)
    assert status["state"] == "queued" and status["connection"]["ok"] is False and "prime login" in status["note"]
    assert tick(run)["connection"]["ok"] is True  # logged in again: it carries on
    with pytest.raises(PrimenbError, match="no READY checkpoint"):
        fetch_checkpoint(run.dir)


def test_422_is_located_in_the_config(platform: FakePlatform) -> None:
    detail = [
        {"loc": ["body", "config", "trainer", "optim", "lr"], "msg": "must be at most 1e-3", "type": "value_error"}
    ]
    platform.fail(r"^/api/v1/training/runs$", 422, body={"detail": detail}, method="POST")
    with pytest.raises(HostedConfigError) as exc:
        backend(yes=True).submit(load_config(HOSTED_RL), name="rejected")
    (d,) = exc.value.report.errors
    lr_line = HOSTED_RL.splitlines().index("lr = 0.0001") + 1
    assert d.path == "trainer.optim.lr" and d.line == lr_line and "at most 1e-3" in d.message
    assert "platform" in exc.value.report.to_text()


def test_500_is_retried_then_recovers(platform: FakePlatform) -> None:
    notes: list[str] = []
    mf = backend(yes=True)
    mf.cli.on_retry = notes.append
    platform.script = ({"status": "RUNNING", "step": 2},)
    run = mf.submit(load_config(HOSTED_RL), name="flaky")
    platform.fail(r"/progress$", 500, times=2)
    status = tick(run)
    assert status["state"] == "running" and [r["step"] for r in run.metric_rows()] == [1, 2]
    assert len(notes) == 2 and all("platform unreachable, retrying" in n for n in notes)
    assert sum(p.endswith("/progress") for p in platform.paths("GET")) == 3
    assert status["connection"]["ok"] is True


def test_404_run_gone_fails_the_mirror(platform: FakePlatform) -> None:
    run = backend(yes=True).submit(load_config(HOSTED_RL), name="gone")
    platform.runs.clear()
    status = tick(run)
    assert status["state"] == "failed" and "404" in status["error"]


def test_hosted_rules_are_located() -> None:
    text = 'clean = true\noutput_dir = "here"\n' + rl_toml(extra='[inference.deployment]\ntype = "disaggregated"\n')
    report = hosted_report(text, "rl")
    found = {(d.path, d.severity, d.line) for d in report.diagnostics}
    lines = text.splitlines()
    assert ("clean", "error", 1) in found and ("output_dir", "warning", 2) in found
    assert ("inference.deployment.type", "error", lines.index('type = "disaggregated"') + 1) in found
    no_inference = hosted_report(rl_toml(), "rl")
    assert [d.message for d in no_inference.errors] == [
        "a hosted RL run needs inference GPUs: this config has no [inference] table"
    ]
    sft = '[data]\nname = "./mine.jsonl"\n[eval]\n'
    errs = {d.path: d.line for d in hosted_report(sft, "sft").errors}
    assert errs == {"data.name": 2, "eval": 3}
    on_volume = hosted_report('[data]\nname = "datasets/mine"\n', "sft", volume="research")
    assert on_volume.ok


def test_rules_show_in_the_cell_when_the_config_names_modelfactory() -> None:
    from primenb.config import check

    text = "clean = true\n" + rl_toml(primenb='backend = "modelfactory"', extra="[inference]\n")
    outcome = check(text)
    assert outcome.model is None
    (d,) = outcome.report.errors
    assert d.path == "clean" and d.line == 1
    assert check("clean = true\n" + rl_toml()).model is not None  # a local run may clean


def test_rules_stop_a_launch_before_the_platform(platform: FakePlatform) -> None:
    with pytest.raises(HostedConfigError) as exc:
        backend(yes=True).submit(load_config(rl_toml(model="primenb/tiny-byte-xs")), name="no-infer")
    assert "inference" in exc.value.report.to_text()
    assert "/api/v1/training/runs" not in platform.paths("POST")


def _fake_prime(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "prime"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    return str(exe)


def test_missing_old_and_chatty_clis(tmp_path: Path) -> None:
    with pytest.raises(CLIMissing, match=re.escape("pip install 'prime>=0.18'")):
        PrimeCLI(executable=str(tmp_path / "absent")).require()
    old = PrimeCLI(executable=_fake_prime(tmp_path, 'echo "Prime CLI version: 0.6.26"'))
    with pytest.raises(CLIMissing, match=r"0\.6\.26.*pip install -U"):
        old.require()
    chatty = PrimeCLI(executable=_fake_prime(tmp_path, 'echo "Welcome! Here is no JSON"'))
    with pytest.raises(NotJSON, match="not JSON"):
        chatty.json("train", "get", "x", "-o", "json")


def test_child_environment_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-x")
    monkeypatch.setenv("PRIME_API_KEY", "k")
    cli = PrimeCLI(team="team_42")
    env = cli.child_env()
    assert "AWS_SECRET_ACCESS_KEY" not in env and "WANDB_API_KEY" not in env
    assert env["PRIME_TEAM_ID"] == "team_42" and env["PRIME_API_KEY"] == "k"
    assert cli.child_env(secrets=["WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY"]).get("WANDB_API_KEY") == "wandb-x"
    assert "AWS_SECRET_ACCESS_KEY" not in cli.child_env(secrets=["AWS_SECRET_ACCESS_KEY"])


def test_backend_show_modelfactory(platform: FakePlatform) -> None:
    """What `%prime_backend show modelfactory` shows (the notebook test runs the magic itself)."""
    from primenb.backends.modelfactory import account

    text = repr(account())
    assert "team_fake" in text and "Fake Lab" in text and "(from env var)" in text
    key = os.environ["PRIME_API_KEY"]
    assert key not in text and key[:6] not in text


def test_terminal_launch_needs_an_answer(platform: FakePlatform, tmp_path: Path) -> None:
    (tmp_path / "rl.toml").write_text(HOSTED_RL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "primenb.cli", "train", "rl.toml", "--backend", "modelfactory", "--name", "term"]
    asked = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert asked.returncode != 0 and "pass --yes" in asked.stdout + asked.stderr
    assert f"${PRICE:.2f}/GPU-hour" in asked.stdout
    assert "/api/v1/training/runs" not in platform.paths("POST")
    done = subprocess.run([*cmd, "--yes", "--detach"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "started term" in done.stdout
    assert os.environ["PRIME_API_KEY"] not in done.stdout + done.stderr


def test_notebook_confirm_widget_monitor_and_no_key_in_outputs(platform: FakePlatform, tmp_path: Path) -> None:
    """The same workflow in a real kernel (nbclient): the confirm widget answered from a later cell,
    the monitor following the run to the end, and the saved notebook free of the key."""
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "%load_ext primenb",
        f"%%rltoml cfg\n{HOSTED_RL}",
        "%prime_train cfg --backend modelfactory --name nb-hosted --gpu-type H200_141GB",
        "from primenb.notebook.confirm import pending\nask = pending()[-1]\nask.launch_button.click()\n"
        "run = ask.run\nprint(ask.answer, run.name, ask.error)",
        "print('final', run.wait(timeout=300), [r['step'] for r in run.metric_rows()])",
        "run",
        "%prime_backend show modelfactory",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=400, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    saved = tmp_path / "hosted.ipynb"
    nbformat.write(nb, saved)

    outs = [c.get("outputs", []) for c in nb.cells]
    assert not [o for cell in outs for o in cell if o.output_type == "error"]
    asked = next(o["data"] for o in outs[2] if "data" in o)
    assert "application/vnd.jupyter.widget-view+json" in asked and f"${PRICE:.2f}/GPU-hour" in asked["text/plain"]
    assert "launched nb-hosted None" in "".join(o.get("text", "") for o in outs[3])
    assert "final completed [1, 2, 3, 4]" in "".join(o.get("text", "") for o in outs[4])
    monitor = next(o["data"] for o in outs[5] if "data" in o)
    # a finished run is shown as its static summary (no widget a saved notebook could not render)
    assert "application/vnd.jupyter.widget-view+json" not in monitor
    assert 'data-state="completed"' in monitor["text/html"] and "H200_141GB" in monitor["text/html"]
    assert "team_fake" in "".join(o.get("data", {}).get("text/plain", "") for o in outs[6])
    key = os.environ["PRIME_API_KEY"]
    assert scan_for(key, saved, tmp_path / "outputs", Path(os.environ["PRIME_HOME"])) == []
    assert key[:6] not in saved.read_text()


def test_a_run_that_is_not_hosted_gets_a_message_with_what_to_use(tmp_path: Path) -> None:
    from primenb.backends.hosted_mirror import hosted_info

    (tmp_path / "local-run").mkdir()
    with pytest.raises(
        PrimenbError, match=r"local-run is not a hosted run .*continue any other run with %prime_harness"
    ):
        hosted_info(tmp_path / "local-run")
    with pytest.raises(PrimenbError, match="not a hosted run"):
        fetch_checkpoint(tmp_path / "local-run")


def test_monitors_wandb_goes_to_the_platform_and_the_key_only_through_the_cli(
    platform: FakePlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As upstream: the submitted config holds [monitors.wandb] (the platform runs W&B), primenb's
    `report_to` stays here, and WANDB_API_KEY goes only as the CLI's own wandbApiKey field."""
    key = "wandb_" + secrets.token_hex(20)
    monkeypatch.setenv("WANDB_API_KEY", key)
    table = '\n[monitors.wandb]\nproject = "hosted-proj"\nname = "hosted-wandb"\ntags = ["nb", "mf"]\n'
    cfg = HOSTED_RL.replace("[primenb]\n", '[primenb]\nreport_to = ["mlflow"]\n', 1) + table
    assert 'report_to = ["mlflow"]' in cfg
    run = backend(yes=True).submit(load_config(cfg), name="hosted-wandb")
    (sent,) = [r["body"] for r in platform.requests if r["path"] == "/api/v1/training/runs"]
    assert sent["config"]["monitors"]["wandb"] == {
        "project": "hosted-proj",
        "name": "hosted-wandb",
        "tags": ["nb", "mf"],
    }
    assert "primenb" not in sent["config"] and "report_to" not in json.dumps(sent["config"])
    assert sent.get("wandbApiKey") == key  # read by the CLI from its environment
    assert not scan_for(key, run.dir, tmp_path / "home")  # never in the run directory or the config copy
