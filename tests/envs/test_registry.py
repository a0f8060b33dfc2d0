"""%prime_env add / list / show / remove on a real IPython shell, and `primenb env` in a terminal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from primenb.envs import get_environment, is_known, resolve
from primenb.envs.errors import RegistryError
from primenb.envs.manage import add
from primenb.notebook.magics import MagicFailed

from .conftest import GOOD_ENV, RAISING_ENV, registry_state, write


def _run(shell, line: str):
    result = shell.run_cell(line)
    return result


def test_add_list_show_remove_a_local_folder(shell, home, tmp_path):
    folder = tmp_path / "echo_digit"
    write(folder / "echo_digit.py", GOOD_ENV)
    result = _run(shell, f"card = %prime_env add {folder}")
    assert result.success, result.error_in_exec
    card = shell.user_ns["card"]
    assert card.id == "echo-digit" and card.source == "local path" and card.where == str(folder)
    assert card.version == "0.3.1" and card.description == "Echo a digit back (a test environment)."
    entry = json.loads((home / "environments" / "echo-digit.json").read_text())
    assert entry["kind"] == "path" and entry["target"] == str(folder)
    assert entry["reward_funcs"] == ["first_char", "short"]
    assert entry["args"] == {"num_examples": 50, "seed": 0}

    assert _run(shell, "df = %prime_env list").success
    df = shell.user_ns["df"]
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns[:5]) == ["id", "version", "source", "description", "reward_functions"]
    rows = df.set_index("id")
    assert rows.loc["echo-digit", "source"] == "local path"
    assert rows.loc["echo-digit", "version"] == "0.3.1"
    assert rows.loc["echo-digit", "reward_functions"] == "first_char, short"
    assert rows.loc["reverse-text", "source"] == "built-in"
    assert rows.loc["arithmetic", "reward_functions"] == "exact_match"

    assert _run(shell, "shown = %prime_env show echo-digit num_examples=5").success
    shown = shell.user_ns["shown"]
    assert [(r.name, r.weight) for r in shown.rewards] == [("first_char", 1.0), ("short", 0.5)]
    assert shown.rewards[0].doc == "1.0 when the reply starts with the answer."
    assert shown.num_train == 5 and shown.num_eval == 10 and shown.args["num_examples"] == 5
    assert shown.system_prompt == "Repeat the digit."
    assert len(shown.samples) == 3
    s = shown.samples[0]
    assert s.prompt == "0" and s.perfect == "0"
    assert s.perfect_reward == 1.25 and s.empty_reward == 0.5  # 1 + 0.5 * 1/2; 0 + 0.5 * 1/1
    html, text = shown._repr_html_(), repr(shown)
    for fragment in ("echo-digit", "first_char", "1.0 when the reply starts with the answer.", "Repeat the digit."):
        assert fragment in html and fragment in text

    # registered: resolvable by id, in this process and in the engine's
    env = get_environment("echo-digit", num_examples=7)
    assert len(env.train_rows()) == 7 and env.is_correct("3", {"answer": "3"})

    result = _run(shell, "%prime_env remove echo-digit")
    assert result.success
    assert not (home / "environments" / "echo-digit.json").exists()
    assert (folder / "echo_digit.py").exists()  # the user's folder is left alone
    assert not is_known("echo-digit")


@pytest.mark.parametrize(
    "files,why",
    [
        ({"x.py": "def something():\n    return 1\n"}, "defines no `load_environment"),
        ({"x.py": "import not_a_module_anywhere\n"}, "raised ModuleNotFoundError"),
        (
            {"x.py": "def load_environment():\n    return {'dataset': [], 'reward_funcs': [len]}\n"},
            "train dataset is empty",
        ),
        (
            {"x.py": "def load_environment():\n    return {'dataset': [{'prompt': 'a', 'answer': 'b'}]}\n"},
            "no reward_funcs",
        ),
        (
            {"x.py": "def load_environment():\n    raise RuntimeError('cannot reach the data')\n"},
            "raised while loading: RuntimeError: cannot reach the data",
        ),
        ({"x.py": "def load_environment(path):\n    return None\n"}, "required argument(s) path"),
        (
            {"x.py": "def load_environment():\n    return {'dataset': [{'prompt': 3}], 'reward_funcs': [len]}\n"},
            "`prompt` must be text",
        ),
        (
            {
                "x.py": "def bad(prompts, completions, **kw):\n    raise KeyError('oops')\n"
                "def load_environment():\n"
                "    return {'dataset': [{'prompt': 'a', 'answer': 'b'}], 'reward_funcs': [bad]}\n"
            },
            "reward function(s) raised on the first example's perfect answer (bad: KeyError",
        ),
        ({"a.py": "", "b.py": ""}, "no environment module in"),
    ],
)
def test_a_bad_folder_is_refused_and_the_registry_is_unchanged(shell, home, tmp_path, files, why):
    good = tmp_path / "good_env"
    write(good / "good_env.py", GOOD_ENV)
    assert _run(shell, f"%prime_env add {good}").success
    before = registry_state(home)
    assert list(before) == ["good-env.json"]

    bad = tmp_path / "bad_env"
    for name, text in files.items():
        write(bad / name, text)
    result = _run(shell, f"%prime_env add {bad} --id good-env --force")  # would replace good-env
    assert not result.success
    assert isinstance(result.error_in_exec, MagicFailed)
    assert why in str(result.error_in_exec)
    assert registry_state(home) == before
    assert not list((home / "environments").glob(".*.tmp"))
    assert len(get_environment("good-env").train_rows()) == 50  # still the good one


def test_refusals_say_what_to_do(home, tmp_path):
    folder = tmp_path / "digits"
    write(folder / "digits.py", GOOD_ENV)
    add(str(folder))
    with pytest.raises(RegistryError, match=r"already registered .* pass --force"):
        add(str(folder))
    with pytest.raises(RegistryError, match="is a built-in environment; register yours under another id"):
        add(str(folder), "reverse-text")
    with pytest.raises(RegistryError, match="not a valid environment id"):
        add(str(folder), "me/digits")
    with pytest.raises(RegistryError, match="does not exist"):
        add(str(tmp_path / "nowhere"))
    from primenb.envs.manage import remove

    with pytest.raises(RegistryError, match="did you mean 'digits'"):
        remove("digit")
    with pytest.raises(RegistryError, match="built-in environment and cannot be removed"):
        remove("arithmetic")
    assert [p.name for p in (tmp_path / "prime-home" / "environments").iterdir()] == ["digits.json"]


def test_moved_folder_says_how_to_fix(home, tmp_path):
    folder = tmp_path / "digits"
    write(folder / "digits.py", GOOD_ENV)
    add(str(folder))
    folder.rename(tmp_path / "elsewhere")
    with pytest.raises(Exception, match="no longer exists; register it again"):
        get_environment("digits")


def test_add_a_module_and_a_file(home, tmp_path, monkeypatch):
    write(tmp_path / "pkgs" / "my_envs" / "__init__.py", "")
    write(tmp_path / "pkgs" / "my_envs" / "digit_task.py", GOOD_ENV)
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    card = add("my_envs.digit_task")
    assert card.id == "digit-task" and card.source == "installed package"
    assert resolve("digit-task").where == "my_envs.digit_task"
    card = add(str(write(tmp_path / "single" / "raising.py", RAISING_ENV)))
    assert card.id == "raising" and [r.name for r in card.rewards] == ["strict", "anything"]
    # the perfect answer scores, the empty one raises in `strict`: shown, not fatal
    sample = card.samples[0]
    assert sample.perfect_reward == 1.5 and sample.empty_reward == 0.5
    assert "ValueError: no digit in the reply" in sample.empty_by_func["strict"]


def test_registry_comes_before_builtins(home, tmp_path):
    from primenb.envs import store

    write(tmp_path / "mine" / "mine.py", GOOD_ENV)
    store.save(store.Entry(id="arithmetic", kind="path", target=str(tmp_path / "mine")))
    assert resolve("arithmetic").source == "local path"
    assert get_environment("arithmetic").system_prompt == "Repeat the digit."
    (home / "environments" / "arithmetic.json").unlink()
    assert resolve("arithmetic").source == "built-in"


def test_unreadable_registry_file_is_skipped_not_deleted(home, tmp_path):
    write(tmp_path / "ok" / "ok.py", GOOD_ENV)
    add(str(tmp_path / "ok"))
    broken = home / "environments" / "broken.json"
    broken.write_text("{not json")
    from primenb.envs import catalog, store

    assert [r["id"] for r in catalog.list_rows(verifiers=False)] == ["arithmetic", "reverse-text", "ok"]
    assert store.problems() and "broken.json" in store.problems()[0]
    assert broken.exists()


def test_show_unknown_and_usage_errors(shell, home):
    result = _run(shell, "%prime_env show revers-text")
    assert isinstance(result.error_in_exec, MagicFailed)
    assert "Did you mean 'reverse-text'" in str(result.error_in_exec)
    result = _run(shell, "%prime_env frobnicate")
    assert "usage: %prime_env list" in str(result.error_in_exec)
    result = _run(shell, "%prime_env show arithmetic num_terms=1")
    assert "num_terms must be an integer >= 2" in str(result.error_in_exec)
    result = _run(shell, "%prime_env show arithmetic bogus=1")
    assert "does not take argument(s) bogus" in str(result.error_in_exec)


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PRIME_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "primenb.cli", "env", *args], capture_output=True, text=True, env=env, check=False
    )


def test_cli_add_list_show_remove(home, tmp_path):
    folder = tmp_path / "echo_digit"
    write(folder / "echo_digit.py", GOOD_ENV)
    out = _cli("add", str(folder), "--id", "digits", home=home)
    assert out.returncode == 0, out.stderr
    assert "registered 'digits'" in out.stdout and "first_char (weight 1)" in out.stdout
    out = _cli("list", "--json", home=home)
    rows = {r["id"]: r for r in json.loads(out.stdout)}
    assert rows["digits"]["source"] == "local path" and rows["digits"]["reward_functions"] == "first_char, short"
    out = _cli("list", home=home)
    assert out.stdout.splitlines()[0].split() == ["id", "version", "source", "description", "reward_functions"]
    out = _cli("show", "digits", "num_examples=4", "--json", home=home)
    card = json.loads(out.stdout)
    assert card["num_train"] == 4 and [r["name"] for r in card["rewards"]] == ["first_char", "short"]
    out = _cli("add", str(tmp_path / "missing"), home=home)
    assert out.returncode == 2 and "does not exist" in out.stderr and "Traceback" not in out.stderr
    out = _cli("remove", "digits", home=home)
    assert out.returncode == 0 and "removed 'digits'" in out.stdout
    assert registry_state(home) == {}
