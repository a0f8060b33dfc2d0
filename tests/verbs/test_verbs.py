"""Each verb has one handler (`primenb.verbs`), shared by the terminal and the magics; backends
describe themselves (`Capabilities`), so nothing above `primenb/backends/` compares their names."""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import keyword
import re
import subprocess
import sys
from pathlib import Path

import pytest

from primenb.commands import COMMANDS
from primenb.verbs.registry import HANDLERS, handler

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "primenb"


def test_every_command_has_one_handler_in_the_verbs_layer_typed_by_its_arguments():
    seen = {}
    for cmd in COMMANDS:
        fn = handler(cmd)
        where = f"{cmd.family} {cmd.name}: {fn.__module__}.{fn.__qualname__}"
        assert fn.__module__ == f"primenb.verbs.{cmd.family}", where
        assert list(inspect.signature(fn).parameters) == ["args", "face"], where
        annotation = inspect.signature(fn).parameters["args"].annotation  # a string (postponed annotations)
        assert fn.__globals__[annotation] is cmd.type, where  # the class it is registered for
        assert dataclasses.is_dataclass(cmd.type) and cmd.type.__dataclass_params__.frozen, where
        seen[fn] = cmd
    assert len(seen) == len(COMMANDS) == len({c.type for c in COMMANDS}) == len(HANDLERS)  # one each


def test_handlers_read_typed_fields_not_names():
    """A handler reads `args.field` (mypy checks it exists), never `getattr(args, "name", default)`,
    which hid which face declared what; `vars(args)` would be the same thing spelled otherwise."""
    found = []
    for path in [*(PKG / "verbs").glob("*.py"), PKG / "cli" / "__init__.py", PKG / "notebook" / "magics.py"]:
        text = path.read_text()
        found += [f"{path.name}: {m}" for m in re.findall(r"(?:getattr|vars|hasattr)\(args\b[^)]*\)", text)]
    assert found == []


def test_the_faces_only_dispatch():
    """No per-face twin of a verb is left: the CLI is one module, the magics one module."""
    assert sorted(p.name for p in (PKG / "cli").glob("*.py")) == ["__init__.py", "__main__.py"]
    assert [p.name for p in (PKG / "notebook").glob("*magics*.py")] == ["magics.py"]
    for face in (PKG / "cli" / "__init__.py", PKG / "notebook" / "magics.py"):
        text = face.read_text()
        assert "import primenb.harness" not in text and "primenb.backends.spec" not in text, face
        assert text.count("except PrimenbError") == 1, face  # one error guard per face


def _comparisons(text: str) -> list[str]:
    names = "|".join(["modelfactory", "local", "ssh", "slurm"])
    return re.findall(rf"""(?:==|!=)\s*["'](?:{names})["']|["'](?:{names})["']\s*(?:==|!=)""", text)


def test_no_backend_name_is_compared_above_the_backends():
    found = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith(("backends/", "engine/")):  # the backends themselves; the engine is "local"
            continue
        found += [f"{rel}: {m}" for m in _comparisons(path.read_text())]
    assert found == []


def test_import_primenb_then_harness_api_works_and_stays_light():
    code = (
        "import sys, primenb, primenb.verbs.registry; f = primenb.harness.traces; g = primenb.harness.get; "
        "assert callable(f) and callable(primenb.harness.apply) and callable(primenb.harness.load); "
        "print(sorted(m for m in ('torch', 'pandas', 'plotly', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


RESERVED = sorted(
    {n for n in dir(builtins) if n.isidentifier() and not keyword.iskeyword(n)} | {"__builtins__", "__name__"}
)


def test_rltoml_refuses_every_builtin_name_and_later_magics_still_work(shell, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hidden = sorted(n for n in shell.user_ns_hidden if n.isidentifier()) + ["_7", "_i7"]
    before = {n: shell.user_ns.get(n) for n in RESERVED + hidden}
    for name in RESERVED + hidden:
        result = shell.run_cell(f"%%rltoml {name}\nmax_steps = 1\n")
        assert type(result.error_in_exec).__name__ == "MagicFailed", name
        assert "choose another name" in str(result.error_in_exec), name
    assert {n: shell.user_ns.get(n) for n in RESERVED + hidden} == before
    assert shell.run_cell("print('still fine'); get_ipython()").success
    assert shell.run_cell("%prime_harness show --last 1").success  # a later magic still works


def test_a_path_under_an_unknown_users_home_is_a_message(shell, tmp_path, monkeypatch):
    from primenb.cli import main

    monkeypatch.chdir(tmp_path)
    result = shell.run_cell("%%rltoml cfg --save ~nosuchuser_primenb/x.toml\nmax_steps = 1\n")
    assert type(result.error_in_exec).__name__ == "MagicFailed"
    assert "no home directory for nosuchuser_primenb" in str(result.error_in_exec)
    assert main(["init", "--out", "~nosuchuser_primenb/rl.toml"]) == 2
    assert main(["validate", "~nosuchuser_primenb/rl.toml"]) == 2


def test_backend_add_says_one_readable_line_and_show_reads_well(shell, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    result = shell.run_cell("%prime_backend add box ssh://me@gpu-box python=/opt/venv/bin/python")
    assert result.success and result.result is None  # no raw repr echoed
    assert "saved backend 'box' (ssh://me@gpu-box); use it with: %prime_train CONFIG --backend box" in (
        capsys.readouterr().out
    )
    spec = shell.run_cell("%prime_backend show box").result
    assert repr(spec).startswith("{") and '"python": "/opt/venv/bin/python"' in repr(spec)
    assert "BackendSpec(" not in repr(spec)
    listed = shell.run_cell("%prime_backend list").result
    assert list(listed["name"]) == ["box"]


@pytest.mark.parametrize("family", ["harness", "env", "backend"])
def test_an_unknown_subcommand_shows_the_usage(shell, family):
    result = shell.run_cell(f"%prime_{family} frobnicate")
    assert type(result.error_in_exec).__name__ == "MagicFailed"
    assert "unknown subcommand 'frobnicate'" in str(result.error_in_exec)
    assert f"%prime_{family} " in str(result.error_in_exec)


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = set()
                while True:
                    top = stack.pop()
                    on.discard(top)
                    scc.add(top)
                    if top == node:
                        break
                if len(scc) > 1:
                    out.append(scc)
    return out


def test_no_import_loop_that_runs():
    """Import loops among primenb's modules: none at run time (`if TYPE_CHECKING:` imports apart)."""
    import grimp

    built = grimp.build_graph("primenb", exclude_type_checking_imports=True, cache_dir=None)
    graph = {
        m: {i for i in built.find_modules_directly_imported_by(m) if i.startswith("primenb")}
        for m in built.modules
        if m.startswith("primenb")
    }
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]  # the counter counts
