"""`%prime_eval` and `%prime_serve start` arguments: declared once (`primenb.commands`), handed
whole to the code that does the work, whose defaults are the declared ones (issue 43)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import primenb.serve.evaluate as ev
from primenb import commands
from primenb.commands import EvalArgs, ServeStartArgs
from primenb.serve import client, episode_eval, verbs

SERVE = Path(ev.__file__).parent
WORK = ("client.py", "evaluate.py", "episode_eval.py", "vf_eval.py", "verbs.py")


def _parsed(cls: type, argv: list[str]) -> Any:
    """The typed arguments the magic builds from ``argv``."""
    cmd = next(c for c in commands.COMMANDS if c.type is cls)
    parser = commands.add_arguments(commands.argparse.ArgumentParser(), cmd, commands.MAGIC)
    return commands.resolve(cmd, commands.MAGIC, parser.parse_args(argv))[1]


def test_the_serve_verb_hands_every_argument_to_start_whose_defaults_are_the_magics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    params = inspect.signature(client.start).parameters
    seen: dict[str, Any] = {}
    monkeypatch.setattr(client, "start", lambda **kw: seen.update(kw))
    args = _parsed(ServeStartArgs, ["t1", "--max-batch", "3", "--max-queue", "7", "--host", "127.0.0.2"])
    verbs.serve_start(args)
    assert seen == commands.work_values(args) and seen["max_batch"] == 3 and seen["host"] == "127.0.0.2"
    defaults = _parsed(ServeStartArgs, [])
    for name, value in commands.work_values(defaults).items():
        if name != "traces":  # [] from the command line, None (every completed trace) in Python
            assert params[name].default == value, name


def test_the_python_eval_takes_the_magics_defaults_and_names_an_unknown_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[EvalArgs, dict[str, Any]]] = []
    monkeypatch.setattr(ev, "run", lambda e, *, env_args, store=True: seen.append((e, env_args)))
    ev.evaluate(["m"], "reverse-text", args={"num_eval": 5}, seed=3)
    (e, env_args), magic = seen[0], _parsed(EvalArgs, ["m", "--env", "reverse-text", "--seed", "3"])
    assert e == magic and env_args == {"num_eval": 5}
    with pytest.raises(TypeError, match=r"'num_example'.*'num_examples'"):
        ev.evaluate(["m"], "reverse-text", num_example=3)


def test_no_eval_or_serve_default_is_written_again_where_the_work_is_done() -> None:
    """A literal default for a declared setting below the verb is a second declaration that drifts
    silently (`%prime_eval`'s were in `evaluate`'s signature, `--max-batch`'s in `client`)."""
    declared = {
        f.name
        for cls in (EvalArgs, ServeStartArgs)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if f.default not in (None, dataclasses.MISSING) and f.name not in commands.PRESENTATION
    }
    again = []
    for name in WORK:
        for node in ast.walk(ast.parse((SERVE / name).read_text())):
            pairs: list[tuple[str, Any]] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs += [(p.arg, d) for p, d in zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True)]
                pairs += [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                pairs.append((node.target.id, node.value))
            again += [f"{name}: {n} = {ast.unparse(d)}" for n, d in pairs if n in declared and not _declared_there(d)]
    assert not again, again


def _declared_there(default: ast.expr) -> bool:
    """``EvalArgs.seed``: the default read from its one declaration; ``None``: nothing declared."""
    if isinstance(default, ast.Constant) and default.value is None:
        return True
    return isinstance(default, ast.Attribute) and ast.unparse(default.value) in {"EvalArgs", "ServeStartArgs"}


def test_the_agent_seat_is_read_from_the_configs_env_table_of_that_environment() -> None:
    """Issue 41: wherever the source sits (``orchestrator.train.source``, a list of eval sources),
    the seat of the source that plays ``env_id`` (``env.taskset.id``, else ``env.id``)."""
    other = {"env": {"taskset": {"id": "reverse-text"}, "agent": {"max_turns": 9}}}
    seat = {"harness": {"id": "null"}, "max_turns": 2}
    config = {
        "orchestrator": {
            "train": {"source": other},
            "eval": {"source": [{"name": "x", "env": {"id": "reverse-turns", "agent": seat}}]},
        }
    }
    plain = SimpleNamespace(config={"eval": {"source": [{"env": {"taskset": {"id": "reverse-turns"}}}]}})
    seated = SimpleNamespace(config=config)
    assert episode_eval.recorded_agent("reverse-turns", [plain, seated]) == (seat, seated)
    assert episode_eval.recorded_agent("reverse-turns", [plain]) == (None, None)  # the taskset's default
