"""The latest ``%prime_eval`` per environment, stored with the trace (``evals/<env>.json``), in the
views: ``%prime_harness show`` (a column per environment), ``show TRACE``, ``diff`` and ``compare``;
a corrupt, foreign or hostile evals file degrades to a warning, never an error."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import primenb.harness as h
from primenb.fsutil import atomic_write_json
from primenb.protocol.index import index_trace
from primenb.protocol.record import write_trace
from primenb.protocol.rundir import RunDir
from tests.harness.synth import make_doc

WHEN = 1_790_000_000.0


def _runs(home: Path, n: int = 3) -> list[Path]:
    """Traces a (newest), b, c ... with identical configs: only their evals differ."""
    out = []
    for i in range(n):
        doc = make_doc(7)  # the same facets for every trace
        doc["trace_id"], doc["name"], doc["parent"] = f"{'abc'[i]}{i:09d}", f"run-{'abc'[i]}", None
        doc["created"] = 1_700_000_000 - i
        run_dir = home / "runs" / doc["name"]
        run_dir.mkdir(parents=True)
        (run_dir / "metrics.jsonl").write_text('{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n')
        write_trace(run_dir, doc)
        assert index_trace(doc, run_dir)
        out.append(run_dir)
    return out


def _eval(run_dir: Path, env: str, mean: float, *, n: int = 20, temperature: float = 0.0, **doc: Any) -> Path:
    """An eval file as `primenb.serve.evaluate` writes it (its own writer is used in one test)."""
    path = RunDir(run_dir).eval_file(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {"model": "m", "reward_mean": mean, "reward_std": 0.1, "ci95_low": mean - 0.05, "ci95_high": mean + 0.05}
    body = {"env": env, "model": "m", "temperature": temperature, "created": WHEN, "samples": []}
    atomic_write_json(path, {**body, "summary": {**summary, "n": n}, **doc})
    return path


def test_show_has_a_column_per_evaluated_environment(home: Path, shell: Any) -> None:
    a, b, _c = _runs(home)
    _eval(a, "reverse-text", 0.5)
    _eval(a, "gsm8k", 0.25)
    _eval(b, "reverse-text", 0.75)
    df = h.traces()
    assert list(df["trace"]) == ["a000000000", "b000000001", "c000000002"]
    assert df["eval:reverse-text"].tolist()[:2] == [0.5, 0.75] and math.isnan(df["eval:reverse-text"].iloc[2])
    assert df["eval:gsm8k"].iloc[0] == 0.25 and df["eval:gsm8k"].iloc[1:].isna().all()
    # a DataFrame: sort and filter by an environment's eval like any column
    assert df.sort_values("eval:reverse-text", ascending=False)["name"].iloc[0] == "run-b"
    header = repr(df).splitlines()[0].split()
    at = header.index("eval")  # "best eval", then the eval columns in env order
    assert header[at + 1 : at + 3] == ["eval:gsm8k", "eval:reverse-text"]
    assert "0.750" in repr(df) and ">eval:reverse-text<" in df._repr_html_()
    result = shell.run_cell("%prime_harness show")
    assert result.success and result.result["eval:gsm8k"].iloc[0] == 0.25
    _eval(a, "gsm8k", 0.125)  # a newer eval replaces the file: the next show has it
    assert h.traces()["eval:gsm8k"].iloc[0] == 0.125
    # no evals anywhere: no eval column at all
    for run_dir in (a, b):
        for f in (run_dir / "evals").iterdir():
            f.unlink()
    assert not [c for c in h.traces().columns if str(c).startswith("eval:")]


def test_cli_show_json_carries_the_eval_columns(home: Path) -> None:
    a, _b, _c = _runs(home)
    _eval(a, "reverse-text", 0.5)
    cmd = [sys.executable, "-m", "primenb.cli", "harness", "show", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows[0]["eval:reverse-text"] == 0.5 and rows[1]["eval:reverse-text"] is None


def test_the_writers_own_file_reads_back(home: Path) -> None:
    from primenb.serve.evaluate import _store  # the format's one writer

    a, *_ = _runs(home, 1)
    trace = SimpleNamespace(run_dir=a, doc={})
    row = {"model": "tiny-adapter-run-a", "reward_mean": 0.375, "ci95_low": 0.3, "ci95_high": 0.45, "n": 8}
    taken = {"seed": 3, "pass_reward": 0.5, "num_examples": 8, "rollouts": 1, "env_args": {}}
    _store(trace, "reverse-text", row, [], "tiny-adapter-run-a", 0.7, taken, None)
    (e,) = h.get("a000000000").latest_evals().items
    assert (e.env, e.mean, e.n, e.temperature, e.model) == ("reverse-text", 0.375, 8, 0.7, "tiny-adapter-run-a")
    assert e.created is not None and abs(e.created - time.time()) < 60


def test_show_trace_lists_its_latest_evals(home: Path) -> None:
    a, *_ = _runs(home, 1)
    _eval(a, "reverse-text", 0.5, n=40, temperature=0.7)
    t = h.get("a000000000")
    frame = t.evals
    assert frame[["env", "mean", "n", "temperature"]].values.tolist() == [["reverse-text", 0.5, 40, 0.7]]
    assert str(frame["created"].iloc[0]).startswith(time.strftime("%Y", time.gmtime(WHEN)))
    text = repr(t)
    assert "            eval: reverse-text 0.5 ± 0.05 (n 40, temperature 0.7, " in text
    html = t._repr_html_()
    assert "latest evaluations (%prime_eval)" in html and "<td" in html and "0.45 to 0.55" in html


def test_diff_shows_the_evals_that_differ(home: Path, shell: Any) -> None:
    a, b, c = _runs(home)
    _eval(a, "reverse-text", 0.5)
    _eval(b, "reverse-text", 0.75)
    _eval(a, "gsm8k", 0.25, temperature=0.7)
    d = h.diff("a000000000", "b000000001")
    assert d.sections() == ["trace", "evals"]  # the same config: only names and evals differ
    evals = d.section("evals")
    assert evals["reverse-text.mean"] == ["0.5", "0.75"]
    assert evals["gsm8k.mean"] == ["0.25", "—"] and evals["gsm8k.temperature"] == ["0.7", "—"]
    assert "reverse-text.n" not in evals  # equal: not a difference
    assert "<b>evals</b>" in d._repr_html_()
    _eval(c, "reverse-text", 0.5)
    same = h.diff("b000000001", "c000000002")  # both evaluated on reverse-text, one better
    assert same.section("evals") == {"reverse-text.mean": ["0.75", "0.5"]}
    result = shell.run_cell("%prime_harness diff a000000000 b000000001")
    assert result.success and "evals" in set(result.result.df["section"])


def test_diff_shows_measured_evals_to_four_digits(home: Path) -> None:
    """A measured mean read 0.11141858141858144: it reads 0.1114, unless 4 digits would make two
    different values look the same."""
    a, b, c = _runs(home)
    _eval(a, "reverse-text", 0.11141858141858144)
    _eval(b, "reverse-text", 0.25)
    _eval(c, "reverse-text", 0.11141858141858)
    assert h.diff("a000000000", "b000000001").section("evals")["reverse-text.mean"] == ["0.1114", "0.25"]
    close = h.diff("a000000000", "c000000002").section("evals")["reverse-text.mean"]
    assert close[0] != close[1] and close[0] == "0.11141858141858144"


def test_compare_summary_has_the_eval_columns(home: Path, shell: Any) -> None:
    a, b, _c = _runs(home)
    _eval(a, "reverse-text", 0.5)
    _eval(b, "gsm8k", 0.25)
    cmp = h.compare("a000000000", "b000000001", "c000000002")
    s = cmp.summary
    assert s["eval:gsm8k"].isna().tolist() == [True, False, True]
    assert s.loc[0, "eval:reverse-text"] == 0.5 and s.loc[1, "eval:gsm8k"] == 0.25
    assert "eval:reverse-text" in repr(cmp) and "eval:gsm8k" in cmp._repr_html_()
    result = shell.run_cell("%prime_harness compare a000000000 b000000001")
    assert result.success and "eval:reverse-text" in result.result.summary.columns


def _corrupt(run_dir: Path, outside: Path) -> dict[str, str]:
    """Every kind of bad file in ``evals/``, and the part of a warning each one gets."""
    folder = run_dir / "evals"
    folder.mkdir(exist_ok=True)
    (folder / "broken.json").write_text('{"env": "broken", "summary": {"reward_m')
    (folder / "list.json").write_text("[1, 2, 3]")
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (folder / "folder.json").mkdir()
    os.mkfifo(folder / "fifo.json")  # a reader must never block on it
    outside.write_text(json.dumps({"env": "leak", "summary": {"reward_mean": 0.99, "n": 1}}))
    (folder / "leak.json").symlink_to(outside)  # a link out of the run directory
    # typed: wrong-typed fields become unknown, the rest is kept
    (folder / "typed.json").write_text(
        json.dumps({"env": "typed", "temperature": "hot", "summary": {"reward_mean": "high", "n": 5}})
    )
    unreadable = "not a readable regular file"
    return {
        "broken.json": "not JSON",
        "binary.json": "not JSON",
        "deep.json": "not JSON (JSON nested too deeply)",
        "list.json": "not a JSON object",
        "leak.json": unreadable,
        "fifo.json": unreadable,
        "folder.json": unreadable,
    }


def test_corrupt_eval_files_degrade_to_warnings(home: Path, tmp_path: Path, shell: Any) -> None:
    a, b, _c = _runs(home)
    _eval(a, "reverse-text", 0.5)
    _eval(b, "reverse-text", 0.75)
    expected = _corrupt(a, tmp_path / "outside.json")
    df = h.traces()
    evals_cols = sorted(c for c in df.columns if str(c).startswith("eval:"))
    assert evals_cols == ["eval:reverse-text"]  # typed.json has no usable mean: no column
    assert df["eval:reverse-text"].tolist()[:2] == [0.5, 0.75]
    assert 0.99 not in df.values  # nothing read through the link
    latest = h.get("a000000000").latest_evals()
    by_env = latest.by_env()
    assert set(by_env) == {"reverse-text", "typed"}
    assert by_env["typed"].n == 5 and by_env["typed"].mean is None and by_env["typed"].temperature is None
    joined = "\n".join(latest.warnings)
    for name, why in expected.items():
        assert f"evals/{name}: {why}" in joined, (name, joined)
    assert "evals/typed.json: temperature" in joined and "summary.reward_mean" in joined
    # every view still answers
    assert "latest evaluations" in h.get("a000000000")._repr_html_() and "eval: typed ? (n 5" in repr(
        h.get("a000000000")
    )
    assert h.diff("a000000000", "b000000001").section("evals")["reverse-text.mean"] == ["0.5", "0.75"]
    assert h.compare("a000000000", "b000000001").summary["eval:reverse-text"].tolist() == [0.5, 0.75]
    assert shell.run_cell("%prime_harness show").success


def test_a_hostile_env_name_is_not_trusted(home: Path) -> None:
    a, *_ = _runs(home, 1)
    script = "<script>alert(1)</script>"
    path = _eval(a, "x", 0.5)
    path.write_text(json.dumps({"env": script, "summary": {"reward_mean": 0.5}}))  # names another environment
    lined = RunDir(a).eval_file("bad\nname")  # the slug of a name with a newline: "bad-name"
    atomic_write_json(lined, {"env": "bad\nname", "summary": {"reward_mean": 0.25}})
    df = h.traces()
    assert {"eval:x", "eval:bad-name"} <= set(df.columns)  # the file's own name, not the document's
    html = df._repr_html_() + h.get("a000000000")._repr_html_()
    assert "<script>" not in html
