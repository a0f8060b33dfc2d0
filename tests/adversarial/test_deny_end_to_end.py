"""Issue 31, "deny is a property of the run": one marker planted in the prompts, the SFT completions
and a reward function's exceptions (which quote the prompt and the completion), carried through
real tiny runs of train, serve and eval driven by the magics in an IPython shell, then searched
for in every file under the test's folders (work dir, PRIME_HOME, run dirs, logs, server logs),
the captured stdout/stderr of this process and its children, the log records, the notebook
outputs and the sidebar's answers. The control run (deny off) must find it, or the search
proves nothing."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # per run: a tiny training, a server, two evals (about a minute)

MARK = "PRIVATE-E2E-MARK-3d81c"
DENY = '[primenb.privacy]\ndata_collection = "deny"\n'
LORA = "\n[model.lora]\nrank = 4\nalpha = 8\n"
EVAL = """
[eval]
interval = 1000
num_examples = 2

[eval.sampling]
max_completion_tokens = 4

[[eval.source]]
name = "markenv"

[eval.source.env.taskset]
id = "markenv"
"""

# The marker is built at import (hex), so the environment's own source and bytecode do not hold it:
# every file under the test's folders can be searched, with no exception for the planted code.
ENV_SOURCE = f'''
"""Rows, answers and a reward whose exceptions quote the prompt and the completion."""

from primenb.envs import completion_text

MARK = bytes.fromhex("{MARK.encode().hex()}").decode()


def picky(prompts, completions, answer, **kwargs):
    """Raises on any reply but the ideal one, quoting what it was given."""
    out = []
    for p, c, a in zip(prompts, completions, answer):
        if completion_text(c) != a:
            raise ValueError(f"cannot score {{p!r}} -> {{completion_text(c)!r}} (want {{a!r}})")
        out.append(1.0)
    return out


def load_environment(**kwargs):
    rows = [{{"prompt": f"{{MARK}} q{{i}}", "answer": f"{{MARK}} a{{i}}"}} for i in range(16)]
    return {{
        "dataset": rows,
        "eval_dataset": rows[:4],
        "reward_funcs": [picky],
        "ideal_completion": lambda row: row["answer"],
    }}
'''


def _register(root: Path) -> None:
    from primenb.envs import store

    folder = root / "src" / "markenv"
    folder.mkdir(parents=True)
    (folder / "markenv.py").write_text(ENV_SOURCE)
    assert MARK not in ENV_SOURCE
    # `%prime_env add` scores the ideal replies as it registers; the entry it would write:
    store.save(store.Entry(id="markenv", kind="path", target=str(folder), version="0", reward_funcs=["picky"]))


def files_with(root: Path, needle: str = MARK) -> list[str]:
    """Every regular file under ``root`` whose bytes hold the marker (as UTF-8 or escaped)."""
    forms = {needle.encode(), json.dumps(needle).encode()[1:-1], needle.encode("unicode_escape")}
    hits = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if any(f in data for f in forms):
                hits.append(str(p.relative_to(root)))
    return hits


def _request(url: str, path: str, body: dict[str, Any]) -> str:
    req = urllib.request.Request(
        url.rstrip("/") + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:  # a refused request: its answer goes to the client only
        return e.read().decode()


class Cells:
    """Runs magics in the shell as a notebook kernel does, keeping every output a notebook would
    save: stdout, stderr and each display's data (all of its MIME types)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.outputs: list[str] = []

    def run(self, cell: str) -> Any:
        from IPython.utils.capture import capture_output

        with capture_output() as cap:
            result = self.shell.run_cell(cell)
        self.outputs += [cap.stdout, cap.stderr]
        self.outputs += [json.dumps(o.data, default=str) for o in cap.outputs]
        if result.result is not None:  # the Out[] of the cell
            fmt, _ = self.shell.display_formatter.format(result.result)
            self.outputs.append(json.dumps(fmt, default=str))
        assert result.success, (cell, result.error_in_exec, self.outputs[-3:])
        return result.result

    def text(self) -> str:
        return "\n".join(self.outputs)


def _sidebar() -> str:
    """What the sidebar's routes answer for every trace (list, detail, samples)."""
    from primenb.server import data

    listed = data.list_traces(limit=500)
    assert listed["items"], listed  # the search below reads every listed trace
    out: list[Any] = [listed]
    for row in listed["items"]:
        out += [data.trace_detail(row["trace"]), data.samples(row["trace"], 50)]
    return json.dumps(out, default=str)


@pytest.mark.parametrize("deny", [True, False], ids=["deny", "control"])
def test_a_marker_in_prompts_completions_and_reward_errors_never_leaves_a_deny_run(
    deny: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shell: Any,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    import primenb.harness as h
    from primenb.serve import client, evaluate
    from primenb.traces.trace import get

    caplog.set_level(logging.DEBUG)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _register(tmp_path)
    cells = Cells(shell)
    toml = sft_toml(
        steps=2, env="markenv", model="primenb/tiny-byte-xs", batch_size=4, extra=LORA + EVAL + (DENY if deny else "")
    )
    try:
        # train: the SFT data's completions hold the marker; the final eval's rewards raise quoting it
        cells.run(f"%%rltoml cfg\n{toml}")
        cells.run("%prime_train cfg --name marky --wait")
        run_dir = next(p.parent for p in tmp_path.rglob("status.json") if "marky" in str(p))
        status = json.loads((run_dir / "status.json").read_text())
        assert status["state"] == "completed", status

        # serve the trained adapter; a few requests quoting the marker, one of them refused
        cells.run("%prime_serve marky")
        (server,) = client.servers()
        model = server.model_of(get("marky"))
        assert model, server.models
        answers = [
            _request(server.url, "/v1/completions", {"model": model, "prompt": f"{MARK} q1", "max_tokens": 4}),
            _request(
                server.url,
                "/v1/chat/completions",
                {"model": model, "messages": [{"role": "user", "content": f"{MARK} q2"}], "max_tokens": 4},
            ),
            _request(server.url, "/v1/completions", {"model": model, "prompt": MARK * 5000, "max_tokens": 4}),
        ]
        assert all(a for a in answers)

        # eval against the running server: the reward raises on each reply, quoting prompt and reply
        # (both evaluators: verifiers' when it is installed, and primenb's own)
        cells.run("%prime_eval marky --env markenv -n 2 --max-tokens 4")
        monkeypatch.setattr(evaluate, "_verifiers_installed", lambda: False)
        cells.run("%prime_eval marky --env markenv -n 2 --max-tokens 4")
    finally:
        client.stop("all") if client.servers() else None
    h.reindex()

    out = capfd.readouterr()
    channels = {
        "files": files_with(tmp_path),
        "stdout/stderr": [s for s in ("out", "err") if MARK in getattr(out, s)],
        "log records": [r.name for r in caplog.records if MARK in r.getMessage() or MARK in str(r.exc_info)],
        "notebook outputs": [o[:200] for o in cells.outputs if MARK in o],
        "sidebar": [MARK] if MARK in _sidebar() else [],
    }
    if deny:
        assert {k: v for k, v in channels.items() if v} == {}
    else:  # control: the same runs without deny leave the marker where each check looks
        assert any(f.endswith("samples.jsonl") for f in channels["files"]), channels
        assert any(f.endswith("markenv.json") for f in channels["files"]), channels  # the stored eval
        assert any(f.endswith(".log") for f in channels["files"]), channels  # the reward's exception
        assert any(f.endswith("engine.log") for f in channels["files"]), channels  # the engine's own
        assert "primenb.envs" in channels["log records"], channels  # the guard's warning in the kernel
        assert channels["notebook outputs"], channels  # the run's display shows its samples
        assert channels["sidebar"], channels
