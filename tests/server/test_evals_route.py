"""``GET traces/ID`` carries the trace's latest ``%prime_eval`` per environment (``evals``) for
the sidebar's detail view; a corrupt evals file is a warning, never a failed answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from primenb.fsutil import atomic_write_json
from primenb.protocol.rundir import RunDir
from tests.server.test_routes import DONE, get

WHEN = 1_790_000_000.0


def _eval(run_dir: Path, env: str, **summary: Any) -> Path:
    path = RunDir(run_dir).eval_file(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"env": env, "model": "tiny-adapter-s-run-3", "temperature": 0.0, "created": WHEN, "samples": []}
    atomic_write_json(
        path, {**doc, "summary": {"reward_mean": 0.5, "ci95_low": 0.4, "ci95_high": 0.6, "n": 20, **summary}}
    )
    return path


async def test_detail_has_the_latest_eval_per_environment(home: Path, jp_fetch: Any) -> None:
    assert (await get(jp_fetch, "traces", DONE))["evals"] == []  # none yet
    run_dir = home / "runs" / "s-run-3"
    _eval(run_dir, "reverse-text")
    _eval(run_dir, "gsm8k", reward_mean=0.25, n=8)
    d = await get(jp_fetch, "traces", DONE)
    assert [e["env"] for e in d["evals"]] == ["gsm8k", "reverse-text"]
    rt = d["evals"][1]
    assert rt == {
        "env": "reverse-text",
        "mean": 0.5,
        "std": None,
        "ci95_low": 0.4,
        "ci95_high": 0.6,
        "n": 20,
        "temperature": 0.0,
        "created": WHEN,
        "model": "tiny-adapter-s-run-3",
    }
    assert d["evals"][0]["mean"] == 0.25 and d["evals"][0]["n"] == 8


async def test_detail_survives_corrupt_and_non_finite_evals(home: Path, jp_fetch: Any) -> None:
    run_dir = home / "runs" / "s-run-3"
    _eval(run_dir, "reverse-text", reward_mean=float("nan"), ci95_high=float("inf"))  # no rows scored
    (run_dir / "evals" / "broken.json").write_text('{"env": "bro')
    (run_dir / "evals" / "typed.json").write_text(json.dumps({"env": "typed", "summary": {"n": "many"}}))
    d = await get(jp_fetch, "traces", DONE)  # strict JSON: NaN never reaches the browser
    by_env = {e["env"]: e for e in d["evals"]}
    assert set(by_env) == {"reverse-text", "typed"}
    assert by_env["reverse-text"]["mean"] is None and by_env["reverse-text"]["ci95_high"] is None
    assert by_env["reverse-text"]["n"] == 20 and by_env["typed"]["n"] is None
    assert any(w.startswith("evals/broken.json: not JSON") for w in d["warnings"])
    assert any(w.startswith("evals/typed.json: summary.n") for w in d["warnings"])
