"""The harness after real tiny runs: traces, the index, show/apply/diff/compare/rerun, privacy.

Runs (module-scoped, on the embedded model; about two minutes on 2 CPU cores):
  C  SFT 40 steps                                (parent of everything below)
  A  GRPO 4 steps from C's checkpoint            (init_from: C is its parent)
  B  GRPO + LoRA, other seeds and env seed       (launched together with A, a failing run F and
  S  a long SFT run, stopped                      a long run S that is stopped)
  C2 %prime_harness apply sft-parent --steps 10  (a continuation: steps 41..50)
  R  primenb harness rerun rl-a                  (must reproduce A's metrics exactly)
  D  A's config with data_collection = "deny"    (no text anywhere in its run directory)
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import primenb.harness as h
from primenb import load_config
from primenb.backends.local import submit
from primenb.errors import PrimenbError
from primenb.harness.refine import ApplyRefused, HarnessWarning
from primenb.run import Run
from tests.harness.conftest import SECRET_KEY, SECRET_TOKEN

pytestmark = [
    pytest.mark.slow,  # trains real (tiny) models in subprocesses
    pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning"),
]

ENV_ARGS = "num_train = 2000\nnum_eval = 50"

SFT = f"""max_steps = 40

[model]
name = "primenb/tiny-byte"

[data]
name = "reverse-text"
batch_size = 32
micro_batch_size = 32
seq_len = 64

[optim]
lr = 2e-3

[eval]
interval = 20
num_examples = 16

[[eval.source]]
name = "reverse-text"

[eval.source.env.taskset]
id = "reverse-text"
{ENV_ARGS}

[ckpt]
interval = 20

[primenb]
seed = 1
sample_every = 10
"""


def rl_text(
    init_from: str, *, seed: int = 0, env_seed: int = 0, lr: str = "5e-5", lora: bool = False, deny: bool = False
) -> str:
    text = f"""max_steps = 4
seq_len = 128

[model]
name = "primenb/tiny-byte"

[orchestrator]
batch_size = 16
group_size = 4

[orchestrator.train.sampling]
max_completion_tokens = 40
temperature = 1.0

[[orchestrator.train.source]]
name = "reverse-text"

[orchestrator.train.source.env.taskset]
id = "reverse-text"
{ENV_ARGS}
seed = {env_seed}

[orchestrator.eval]
interval = 2
num_examples = 8

[[orchestrator.eval.source]]
name = "reverse-text"

[orchestrator.eval.source.env.taskset]
id = "reverse-text"
{ENV_ARGS}
seed = {env_seed}

[trainer.optim]
lr = {lr}
"""
    if lora:
        text += '\n[trainer.model.lora]\nrank = 4\nalpha = 8\ntarget_modules = ["q_proj", "v_proj"]\n'
    text += f'\n[primenb]\nseed = {seed}\nsample_every = 1\ninit_from = "{init_from}"\n'
    if deny:
        text += '\n[primenb.privacy]\ndata_collection = "deny"\n'
    return text


def _wait(*runs: Run) -> None:
    for run in runs:
        assert run.wait(timeout=600) in ("completed", "failed", "stopped"), run.logs()


@pytest.fixture(scope="module")
def runs(workdir: Path) -> dict[str, Any]:
    from IPython.core.interactiveshell import InteractiveShell

    c = submit(load_config(SFT), name="sft-parent")
    _wait(c)
    assert c.state == "completed", c.logs()
    ckpt = str(c.dir / "checkpoints" / "step_40")
    a = submit(load_config(rl_text(ckpt)), name="rl-a")
    b = submit(load_config(rl_text(ckpt, seed=3, env_seed=7, lr="1e-4", lora=True)), name="rl-b-lora")
    # a hub model SFT needs a typed renderer for (upstream's rule); it fails at load, not at validation
    missing = SFT.replace("primenb/tiny-byte", "no-such-org/missing-model") + '\n[renderer]\nname = "qwen3"\n'
    f = submit(load_config(missing), name="broken")
    long = submit(load_config(SFT.replace("max_steps = 40", "max_steps = 100000")), name="stopped")
    _wait(a, b, f)
    assert a.state == "completed" and b.state == "completed", a.logs() + b.logs()
    assert long.stop(timeout=120) == "stopped"
    shell = InteractiveShell.instance()  # apply through the magic, rerun through the CLI
    shell.run_line_magic("load_ext", "primenb")
    with _no_warning():
        result = shell.run_cell("c2 = %prime_harness apply sft-parent --steps 10")
    assert result.success, result.error_in_exec
    c2 = shell.user_ns.pop("c2")
    out = subprocess.run(
        [sys.executable, "-m", "primenb.cli", "harness", "rerun", "rl-a", "--detach"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    r = Run(out.stdout.strip().splitlines()[-1].split(" in ", 1)[1])
    d = submit(load_config(rl_text(ckpt, deny=True)), name="rl-deny")
    _wait(c2, r, d)
    return {"C": c, "A": a, "B": b, "F": f, "S": long, "C2": c2, "R": r, "D": d}


class _no_warning:
    def __enter__(self) -> None:
        import warnings

        self._ctx = warnings.catch_warnings(record=True)
        self.caught = self._ctx.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)
        harness = [w for w in self.caught if issubclass(w.category, HarnessWarning)]
        assert not harness, [str(w.message) for w in harness]


def T(runs: dict[str, Any], key: str) -> Any:
    return h.get(runs[key])


def _metrics(run: Run) -> list[dict[str, Any]]:
    return run.metric_rows()


# ---------------------------------------------------------------------------------------------
# the trace


def test_every_field_is_recorded(runs: dict[str, Any], workdir: Path) -> None:
    c, a, b = T(runs, "C"), T(runs, "A"), T(runs, "B")
    d = c.doc
    assert len(c.id) == 10 and c.id != a.id != b.id
    assert json.loads((runs["C"].dir / "trace.json").read_text())["trace_id"] == c.id  # stable
    assert d["name"] == "sft-parent" and d["backend"] == "local" and d["mode"] == "sft" and d["host"]
    assert d["status"] == "completed" and d["created_at"] and d["finished_at"] and d["duration_s"] > 0
    assert d["parent"] is None and a.parent == c.id and b.parent == c.id  # init_from -> lineage
    assert d["steps"] == {"start": 0, "last": 40, "max": 40}
    # model + architecture
    assert d["model"]["id"] == "primenb/tiny-byte" and d["model"]["num_params"] == 558_976
    assert d["finetune"] == "full" and d["adapter"] is None
    assert b.doc["finetune"] == "lora"
    assert b.doc["adapter"] == {
        "type": "lora",
        "rank": 4,
        "alpha": 8.0,
        "dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
        "modules_to_save": [],
        "from_checkpoint": False,
    }
    # the full hyperparameter snapshot = the resolved config the engine trained
    resolved = json.loads((runs["B"].dir / "configs" / "resolved.json").read_text())
    assert b.config == resolved and b.config["trainer"]["optim"]["lr"] == 1e-4
    assert b.doc["trainer_args"]["learning_rate"] == 1e-4 and b.doc["trainer_args"]["num_generations"] == 4
    # data: env id, version, args, hashes of train and eval separately
    train = a.doc["data"]["train"]["sources"][0]
    assert train["env_id"] == "reverse-text" and train["version"] and train["examples"] == 2000
    assert train["args"]["num_train"] == 2000 and train["args"]["seed"] == 0
    assert a.doc["data"]["eval"]["examples"] == 8 and a.doc["data"]["eval"]["hash"] != a.doc["data"]["train"]["hash"]
    # metrics: final and best eval with steps, the reward curve
    m = c.doc["metrics"]
    ev = m["eval"]["eval/reverse-text/reward"]
    assert ev["final_step"] == 40 and ev["best_step"] in (0, 20, 40) and ev["best"] >= ev["final"]
    assert m["final_eval"]["step"] == 40 and m["best_eval"]["value"] == ev["best"]
    assert m["curves"]["loss"]["points"] == 40 and m["curves"]["loss"]["last"] < m["curves"]["loss"]["first"]
    curve = a.doc["metrics"]["curves"]["reward"]
    assert curve["points"] == 4 and curve["first_step"] == 1 and curve["last_step"] == 4
    assert (
        a.doc["metrics"]["final_reward"] == _metrics(runs["A"])[-2]["reward"]
        or a.doc["metrics"]["final_reward"] == curve["last"]
    )
    # seeds
    s = b.doc["seeds"]
    assert s["python"] == s["numpy"] == s["torch"] == s["sampling"] == 3 and s["data_order"] == 3
    assert s["environments"]["train:reverse-text"] == 7
    assert c.doc["seeds"]["torch"] == 1 and c.doc["seeds"]["model_init"] == 1
    assert a.doc["seeds"]["model_init"] is None  # weights came from C's checkpoint
    assert a.doc["determinism"]["deterministic_algorithms"] is True
    # dependencies and hardware
    deps = d["deps"]
    for pkg in ("python", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "primenb"):
        assert deps.get(pkg), pkg
    assert ("torch_cuda" in deps and "verifiers" not in deps) or deps.get("verifiers")
    hw = d["hardware"]
    assert hw["cpu_model"] and hw["cpu_count"] >= 1 and hw["gpu_count"] == len(hw["gpus"])
    # git of the working directory
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=workdir).stdout.strip()
    assert d["git"]["commit"] == head and d["git"]["dirty"] is True
    # checkpoints and the final model / adapter
    assert [ck["step"] for ck in d["checkpoints"]] == [20, 40]
    assert d["final"] == {"path": str(runs["C"].dir / "checkpoints" / "step_40"), "kind": "model", "step": 40}
    assert b.doc["final"]["kind"] == "adapter"


def test_failed_run_leaves_a_completed_trace(runs: dict[str, Any]) -> None:
    f = T(runs, "F")
    assert f.status == "failed" and "no-such-org/missing-model" in f.doc["error"]
    assert f.doc["finished_at"] and f.doc["final"] is None and f.doc["deps"]["python"]
    assert f.fingerprint is None  # the model was never built


def test_stopped_run_leaves_a_completed_trace(runs: dict[str, Any]) -> None:
    s = T(runs, "S")
    assert s.status == "stopped" and s.doc["stop_reason"] == "STOP file" and s.doc["finished_at"]
    last = s.doc["steps"]["last"]
    assert 0 < last < 100_000 and s.doc["final"]["step"] == last and s.final_checkpoint.exists()
    assert s.doc["metrics"]["curves"]["loss"]["last_step"] == last


def test_fingerprint_is_architecture_not_weights(runs: dict[str, Any]) -> None:
    from primenb.engine.fingerprint import fingerprint, fingerprint_for_checkpoint, fingerprint_from_config
    from primenb.engine.models import build_tiny_model, tiny_config

    c, a, b = T(runs, "C"), T(runs, "A"), T(runs, "B")
    assert c.fingerprint and c.fingerprint == a.fingerprint == b.fingerprint  # LoRA: the base counts
    assert fingerprint(build_tiny_model("xs", seed=123))["fingerprint"] == c.fingerprint  # other weights
    assert fingerprint_for_checkpoint(b.final_checkpoint)["fingerprint"] == c.fingerprint  # adapter -> base
    xs = tiny_config("xs")
    deeper = type(xs)(**{**xs.to_dict(), "num_hidden_layers": 3, "layer_types": None})  # one layer more
    assert fingerprint_from_config(type(xs)(**xs.to_dict()))["fingerprint"] == c.fingerprint
    assert fingerprint_from_config(deeper)["fingerprint"] != c.fingerprint
    assert fingerprint_from_config(tiny_config("s"))["fingerprint"] != c.fingerprint


def test_data_hash_follows_the_examples(runs: dict[str, Any]) -> None:
    c, a, b, r = T(runs, "C"), T(runs, "A"), T(runs, "B"), T(runs, "R")
    assert a.data["train"]["hash"] == r.data["train"]["hash"] == c.data["train"]["hash"]  # same rows
    assert b.data["train"]["hash"] != a.data["train"]["hash"]  # env seed 7 instead of 0
    assert b.data["eval"]["hash"] != a.data["eval"]["hash"]
    from primenb.harness.refine import data_differences, edited_config

    text = (runs["A"].dir / "configs" / "config.toml").read_text()
    changed = edited_config(text, [("orchestrator.train.source[0].env.taskset.num_train", 1500)])
    notes = data_differences(a, changed)
    assert len(notes) == 1 and "num_train: 2000 -> 1500" in notes[0]
    assert data_differences(a, edited_config(text, [])) == []


# ---------------------------------------------------------------------------------------------
# apply


def test_apply_continues_from_the_parent_checkpoint(runs: dict[str, Any]) -> None:
    c, c2 = T(runs, "C"), T(runs, "C2")
    assert c2.status == "completed" and c2.parent == c.id
    assert c2.doc["steps"] == {"start": 40, "last": 50, "max": 50}
    assert c2.config["primenb"]["init_from"] == str(c.final_checkpoint)
    assert c2.fingerprint == c.fingerprint
    parent_rows, child_rows = _metrics(runs["C"]), _metrics(runs["C2"])
    child_losses = [r for r in child_rows if "loss" in r]
    assert child_losses[0]["step"] == 41 and child_losses[-1]["step"] == 50  # counts on from 40
    assert min(r["step"] for r in child_rows) == 41
    first, last = parent_rows[0], [r for r in parent_rows if "loss" in r][-1]
    scratch = next(r["loss"] for r in parent_rows if "loss" in r)
    assert abs(child_losses[0]["loss"] - last["loss"]) < 0.25 * (scratch - last["loss"]), (
        scratch,
        last["loss"],
        child_losses[0]["loss"],
    )  # near the parent's end, not from scratch
    assert first["step"] == 0
    assert (runs["C2"].dir / "checkpoints" / "step_50" / "model.safetensors").exists()
    assert [e["trace"] for e in c2.lineage()] == [c.id, c2.id]
    kids = [k for k, _ in c.children()]
    assert set(kids) >= {T(runs, "A").id, T(runs, "B").id, c2.id}


def test_apply_refuses_a_different_architecture(runs: dict[str, Any]) -> None:
    before = len(h.traces())
    with pytest.raises(ApplyRefused, match="fingerprint mismatch") as err:
        h.apply("sft-parent", steps=5, overrides=["model.name=primenb/tiny-byte-s"])
    assert "keep model.name = 'primenb/tiny-byte'" in str(err.value)
    assert len(h.traces()) == before  # nothing launched


def test_apply_refuses_a_missing_checkpoint(runs: dict[str, Any]) -> None:
    with pytest.raises(ApplyRefused, match="no final checkpoint"):
        h.apply("broken")
    b = T(runs, "B")
    ckpt = b.final_checkpoint
    moved = ckpt.with_name("moved-away")
    ckpt.rename(moved)
    try:
        with pytest.raises(ApplyRefused, match="missing or incomplete"):
            h.apply(b.id)
    finally:
        moved.rename(ckpt)


# ---------------------------------------------------------------------------------------------
# rerun, privacy


def test_rerun_reproduces_the_metrics_exactly(runs: dict[str, Any]) -> None:
    a, r = T(runs, "A"), T(runs, "R")
    assert r.status == "completed" and r.doc["reproduces"] == a.id and r.parent == a.parent
    rep = r.doc["reproduction"]
    assert rep["metrics_match"] is True, rep["mismatches"]
    assert rep["rows_compared"] == len(_metrics(runs["A"])) and rep["max_abs_diff"] == 0.0
    assert rep["data_match"] and rep["fingerprint_match"]
    for key in ("reward", "loss", "grad_norm", "eval/reverse-text/reward"):
        ours = [(x["step"], x[key]) for x in _metrics(runs["R"]) if key in x]
        theirs = [(x["step"], x[key]) for x in _metrics(runs["A"]) if key in x]
        assert ours == theirs and ours, key  # bit for bit
    assert any(x.get("reward", 0) > 0 for x in _metrics(runs["A"]))  # not a trivial all-zero curve
    assert h.traces(where=f"reproduces = '{a.id}'")["metrics_match"].tolist() == [1]


def _all_bytes(run_dir: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in run_dir.rglob("*") if p.is_file()]


def test_deny_leaves_no_sample_text_in_the_run_directory(runs: dict[str, Any]) -> None:
    a, dd = T(runs, "A"), T(runs, "D")
    assert dd.doc["privacy"]["data_collection"] == "deny"
    texts = set()
    for s in a.sample_rows():  # what the same run writes when collection is allowed
        texts |= {s.get("prompt") or "", s.get("completion") or "", s.get("answer") or ""}
    texts = {t for t in texts if len(t) >= 6}
    assert len(texts) > 10
    rows = dd.sample_rows()
    assert rows and all("prompt" not in s and "completion" not in s and "answer" not in s for s in rows)
    assert all(len(s["completion_hash"]) == 64 and "reward" in s for s in rows)
    import hashlib

    from primenb.protocol.hashing import private_digest

    first = next(s for s in a.sample_rows() if s["step"] == rows[0]["step"])
    assert rows[0]["prompt_hash"] == private_digest(first["prompt"])  # comparable on this machine
    assert rows[0]["prompt_hash"] != hashlib.sha256(first["prompt"].encode()).hexdigest()  # keyed
    for path, data in _all_bytes(runs["D"].dir):
        for t in texts:
            assert t.encode() not in data, (path, t)
    # training itself is unchanged by the setting
    from primenb.protocol.record import compare_metrics

    assert compare_metrics(_metrics(runs["A"]), _metrics(runs["D"]))["metrics_match"]
    assert "withheld" in dd._repr_html_()


def test_secrets_never_reach_run_directories(runs: dict[str, Any], workdir: Path) -> None:
    for run in runs.values():
        for path, data in _all_bytes(run.dir):
            assert SECRET_TOKEN.encode() not in data and SECRET_KEY.encode() not in data, path
        env = h.get(run).doc.get("env_vars") or {}
        assert "HF_TOKEN" not in env and "MY_SERVICE_API_KEY" not in env
    assert h.get(runs["A"]).doc["env_vars"].get("HF_HUB_OFFLINE") == "1"  # others are kept
    from primenb.protocol.hashing import REDACTED, redact

    cfg = {
        "env_vars": {"HF_TOKEN": "abc", "OMP_NUM_THREADS": "2"},
        "note": f"x {SECRET_TOKEN} y",
        "orchestrator": {"seq_len": 128, "max_completion_tokens": 40},
    }
    out = redact(cfg)
    assert out["env_vars"] == {"HF_TOKEN": REDACTED, "OMP_NUM_THREADS": "2"}
    assert SECRET_TOKEN not in out["note"] and out["orchestrator"]["max_completion_tokens"] == 40


# ---------------------------------------------------------------------------------------------
# show, diff, compare


def test_show_lists_traces_newest_first_with_filters(runs: dict[str, Any], shell: Any) -> None:
    df = h.traces()
    ids = {k: T(runs, k).id for k in runs}
    assert set(ids.values()) <= set(df["trace"])
    assert list(df["created"]) == sorted(df["created"], reverse=True)
    for col in (
        "trace",
        "parent",
        "name",
        "created",
        "status",
        "mode",
        "model",
        "env",
        "steps",
        "lr",
        "batch",
        "group_size",
        "lora_rank",
        "final_reward",
        "best_eval",
        "duration",
        "backend",
    ):
        assert col in df.columns, col
    row = df.set_index("trace").loc[ids["B"]]
    assert row["lora_rank"] == 4 and row["lr"] == 1e-4 and row["batch"] == 16 and row["group_size"] == 4
    assert row["parent"] == ids["C"] and row["env"] == "reverse-text" and row["steps"] == 4
    assert list(h.traces(status="failed")["trace"]) == [ids["F"]]
    assert set(h.traces(where="lora_rank = 4")["trace"]) == {ids["B"]}
    assert set(h.traces(model="missing")["trace"]) == {ids["F"]}
    assert len(h.traces(last=2)) == 2 and len(h.traces(env="reverse-text")) >= 8
    html = df._repr_html_()
    assert ids["C2"] in html and "completed" in html and "<table" in html
    assert df.attrs["short_ids"][ids["A"]] in repr(df)  # ids as their shortest unique prefix
    # the magic: a DataFrame, a detail view, errors without a traceback
    result = shell.run_cell("df = %prime_harness show --last 3 --status completed")
    assert result.success and len(shell.user_ns["df"]) == 3
    result = shell.run_cell(f"%prime_harness show {ids['C2'][:6]}")
    assert result.success and result.result.id == ids["C2"]
    detail = result.result._repr_html_()
    for part in (
        "lineage",
        ids["C"],
        "config (resolved)",
        "data",
        "dependencies",
        "hardware",
        "<svg",
        "sample completions",
    ):
        assert part in detail, part
    assert "→" in repr(result.result)
    bad = shell.run_cell("%prime_harness show --where 'no_such_column > 1'")
    assert not bad.success and "bad --where expression" in str(bad.error_in_exec)
    assert type(bad.error_in_exec).__name__ == "MagicFailed"
    missing = shell.run_cell("%prime_harness show nothing-like-this")
    assert "no trace 'nothing-like-this'" in str(missing.error_in_exec)


def test_diff_on_three_runs(runs: dict[str, Any], shell: Any) -> None:
    a, b, c = T(runs, "A"), T(runs, "B"), T(runs, "C")
    d = h.diff(a, b, c)
    cfg = d.section("config")
    assert cfg["trainer.optim.lr"] == ["5e-05", "0.0001", "—"] and cfg["optim.lr"] == ["—", "—", "0.002"]
    assert cfg["primenb.seed"] == ["0", "3", "1"]
    assert "primenb.seed" in cfg and "data.name" in cfg  # SFT keys exist only in C
    assert "adapter.rank" in d.section("model")
    assert any(k.endswith(".args.seed") for k in d.section("environment"))
    assert "train.hash" in d.section("data")
    assert not d.section("deps") and not d.section("hardware")  # same machine, same stack
    html = d._repr_html_()
    assert "trainer.optim.lr" in html and a.id in html and "config" in html
    assert list(d.df.columns[:2]) == ["section", "key"] and len(d.df) == len(d.rows)
    same = h.diff(a, T(runs, "R"))  # a rerun differs in name and lineage only
    assert set(same.sections()) == {"trace"}, same.rows
    result = shell.run_cell(f"%prime_harness diff {a.id} {b.id} {c.id}")
    assert result.success and len(result.result) == len(d)


def test_compare_overlays_curves_of_three_runs(runs: dict[str, Any], shell: Any, tmp_path: Path) -> None:
    cmp = h.compare("sft-parent", T(runs, "C2").id, T(runs, "A").id)
    assert cmp.metrics[0] == "reward" and "loss" in cmp.metrics and "eval/reverse-text/reward" in cmp.metrics
    fig = cmp.figure
    assert fig.title == cmp.title and "sft-parent" in cmp.title
    assert [title for title, _ in fig.charts] == cmp.metrics  # one SVG chart per metric
    labels = list(cmp.series("loss"))
    assert len(labels) == 3
    # one line per trace, each trace in one colour in every chart (a legend entry per drawn line)
    colors: dict[str, set[str]] = {}
    for _, svg in fig.charts:
        for color, label in re.findall(r'style="fill:(#[0-9a-f]{6})">([^<]+)</text>', svg):
            colors.setdefault(html.unescape(label), set()).add(color)
    assert set(colors) == set(labels) and all(len(c) == 1 for c in colors.values()), colors
    assert len({c for cs in colors.values() for c in cs}) == 3
    c2 = next(label for label in labels if label.startswith(T(runs, "C2").id))
    assert min(step for step, _ in cmp.series("loss")[c2]) == 41  # the continuation sits after its parent
    page = cmp.write_html(tmp_path / "compare.html").read_text(encoding="utf-8")  # compare --html FILE
    assert page.count("<svg") == len(cmp.metrics) and "<script" not in page and "final loss" in page
    summary = cmp.summary
    assert list(summary["trace"]) == [T(runs, k).id for k in ("C", "C2", "A")]
    assert summary.loc[1, "steps"] == "40→50"
    assert "<svg" in cmp._repr_html_() and "final loss" in repr(cmp)
    result = shell.run_cell(f"%prime_harness compare sft-parent {T(runs, 'C2').id} --metric loss")
    assert result.success
    with pytest.raises(PrimenbError, match="no trace logged"):
        h.compare("sft-parent", metrics=["nonexistent"])


# ---------------------------------------------------------------------------------------------
# the index


def test_index_deleted_or_corrupted_is_rebuilt_with_nothing_lost(runs: dict[str, Any]) -> None:
    from primenb.protocol.index import Index

    before = h.traces().drop(columns=["steps"]).sort_values("trace").reset_index(drop=True)
    index = Index()
    for suffix in ("", "-wal", "-shm"):
        Path(str(index.path) + suffix).unlink(missing_ok=True)
    after = h.traces().drop(columns=["steps"]).sort_values("trace").reset_index(drop=True)
    assert after.equals(before)
    index.path.write_bytes(b"this is not a sqlite database" * 100)
    fresh = Index()
    assert fresh.count() == len(before) and fresh.rebuilt and "corrupt" in fresh.rebuilt
    assert list(index.folder.glob("index.sqlite.corrupt-*"))  # kept aside for inspection
    assert set(h.traces()["trace"]) == set(before["trace"])
    stats = h.reindex()
    assert stats["traces"] == len(before)


def test_cli_show_and_diff(runs: dict[str, Any]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "primenb.cli", "harness", "show", "--last", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("trace") and len(lines) == 3, (
        out.stdout
    )  # the header, then 2 traces, each whole on one line
    a, r = T(runs, "A"), T(runs, "R")
    out = subprocess.run(
        [sys.executable, "-m", "primenb.cli", "harness", "diff", a.id, r.id], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "reproduces" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "primenb.cli", "harness", "show", "nope"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "no trace 'nope'" in out.stderr


# ---------------------------------------------------------------------------------------------
# models back in the notebook, export / import, rm


def test_load_and_generate(runs: dict[str, Any]) -> None:
    model, tok = h.load("sft-parent")
    assert not model.training and len(tok) == 260
    greedy = h.generate("sft-parent", ["abcdef", "hello"], max_new_tokens=30)
    assert isinstance(greedy, list) and len(greedy) == 2
    assert greedy == h.generate("sft-parent", ["abcdef", "hello"], max_new_tokens=30)
    assert h.generate("sft-parent", "abcdef", max_new_tokens=30) == greedy[0]
    sampled = h.generate("sft-parent", "abcdef", temperature=1.0, seed=0, max_new_tokens=20)
    assert sampled == h.generate("sft-parent", "abcdef", temperature=1.0, seed=0, max_new_tokens=20)
    lora_model, _ = h.load(T(runs, "B"))
    assert hasattr(lora_model, "peft_config")  # the adapter is applied


def test_export_import_and_rm(runs: dict[str, Any], workdir: Path) -> None:
    b = T(runs, "B")
    from primenb.traces.trust import made_here

    assert made_here(b)  # the engine left its record when it started the run here
    folder = h.export(b, str(workdir / "exported-b"))
    assert (folder / "final" / "adapter_model.safetensors").exists()
    assert (folder / "configs" / "config.toml").exists() and (folder / "trace.json").exists()
    with pytest.raises(PrimenbError, match="already here"):
        h.import_(str(folder))
    print(h.rm(b))  # the trace goes, the run directory stays
    assert not (runs["B"].dir / "trace.json").exists() and runs["B"].dir.exists()
    assert b.id not in set(h.traces()["trace"]) and b.id not in set(h.reindex() and h.traces()["trace"])
    back = h.import_(str(folder), str(workdir / "elsewhere" / "b"))
    assert back.id == b.id and back.final_checkpoint.exists() and back.doc["imported"]["from"]
    assert not made_here(back)  # same trace id, another folder: imported, untrusted
    assert h.get(b.id).run_dir == workdir / "elsewhere" / "b"
    model, _ = h.load(b.id)
    assert hasattr(model, "peft_config")
    assert isinstance(h.generate(b.id, "abcde", max_new_tokens=8), str)
    print(h.rm(b.id, files=True))
    assert not (workdir / "elsewhere" / "b").exists() and b.id not in set(h.traces()["trace"])
