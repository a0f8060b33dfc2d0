"""Issue 22, the small ones, each at its root: the reward guard catches every non-finite or
unconvertible score; an environment's helper modules never shadow a library; `%prime_env add`
bounds each reward call in time; time stamps keep their UTC offset; liveness without /proc never
signals a group it cannot tell from a reused one."""

from __future__ import annotations

import decimal
import fractions
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest


class Raises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __float__(self) -> float:
        raise self.exc


class Weird(float):
    pass


UNSCORABLE: list[Any] = [
    10**400, -(10**400), float("nan"), float("inf"), -float("inf"), decimal.Decimal("NaN"), decimal.Decimal("1e400"),
    fractions.Fraction(10**400, 3), complex(1, 2), "1.0x", b"1x", [1.0], {}, object(),
    Raises(RuntimeError("boom")), Raises(KeyError("k")), Raises(OverflowError()), Raises(ZeroDivisionError()),
    Raises(RecursionError()), Raises(SystemError()), Raises(AttributeError("a")),
]  # fmt: skip
SCORABLE: list[Any] = [1, 0.5, True, decimal.Decimal("0.25"), fractions.Fraction(1, 4), Weird(0.75), None, -3]


def test_reward_guard_catches_every_unscorable_value() -> None:
    from primenb.envs.guard import FAILED_SCORE, guard

    values = UNSCORABLE + SCORABLE
    wrapped = guard(lambda prompts, completions, **kw: list(values), "e")
    got = wrapped(prompts=["p"] * len(values), completions=["c"] * len(values))
    assert got[: len(UNSCORABLE)] == [FAILED_SCORE] * len(UNSCORABLE)
    assert got[len(UNSCORABLE) :] == [1.0, 0.5, 1.0, 0.25, 0.25, 0.75, None, -3.0]
    assert all(v is None or (type(v) is float and math.isfinite(v)) for v in got)
    assert wrapped.failed == len(UNSCORABLE)


def test_reward_guard_an_iterator_that_raises_is_the_functions_error() -> None:
    from primenb.envs.errors import RewardFunctionError
    from primenb.envs.guard import guard

    def scores() -> Any:
        yield 1.0
        raise RuntimeError("half way")

    wrapped = guard(lambda prompts, completions, **kw: scores(), "e")
    with pytest.raises(RewardFunctionError, match="not a list"):
        wrapped(prompts=["p", "q"], completions=["c", "d"])


HELPER_NAMES = ["colorsys", "wave", "datasets", "json", "utils", "helpers_only_here"]


def test_env_helper_module_never_shadows_a_library(tmp_path: Path) -> None:
    """In a fresh interpreter: an environment folder with helpers named like libraries (stdlib,
    `datasets`) and one named like nothing else; after the import the libraries are theirs."""
    folder = tmp_path / "shadowenv"
    folder.mkdir()
    for name in HELPER_NAMES:
        (folder / f"{name}.py").write_text("HELPER = True\n")
    imports = "\n".join(f"import {n} as _{n}" for n in HELPER_NAMES)
    (folder / "shadowenv.py").write_text(
        f"{imports}\nassert _colorsys.HELPER\ndef load_environment():\n    return None\n"
    )
    script = textwrap.dedent(
        f"""
        import importlib, importlib.util, sys
        from pathlib import Path
        from primenb.envs.local import import_path
        import_path(Path({str(folder)!r}), "shadowenv")
        folder = {str(folder)!r}
        for name in ("colorsys", "wave", "json"):
            mod = importlib.import_module(name)
            assert not hasattr(mod, "HELPER"), name
            assert name == "json" or sys.modules["primenb_env_shadowenv." + name].HELPER  # json: already loaded
        spec = importlib.util.find_spec("datasets")
        assert spec is None or not str(spec.origin).startswith(folder), spec
        assert "datasets" not in sys.modules or not str(sys.modules["datasets"].__file__).startswith(folder)
        import helpers_only_here  # a name nothing else provides keeps working late
        assert helpers_only_here.HELPER
        print("ok")
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]


HANGING_ENV = """
import time
from primenb.envs import get_environment


def load_environment(**kwargs):
    env = get_environment("reverse-text", **kwargs)
    (inner,) = env.reward_funcs

    def slow(prompts, completions, **kw):
        time.sleep(30)
        return inner(prompts=prompts, completions=completions, **kw)

    env.reward_funcs = [slow]
    return env
"""


def test_env_add_bounds_each_reward_call_in_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from primenb.envs import catalog, manage, store
    from primenb.envs.errors import RegistryError

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(catalog, "REWARD_CALL_TIMEOUT", 0.5)
    folder = tmp_path / "hangs"
    folder.mkdir()
    (folder / "hangs.py").write_text(HANGING_ENV)
    start = time.monotonic()
    with pytest.raises(RegistryError, match=r"did not return within 0\.5 s"):
        manage.add(str(folder))
    assert time.monotonic() - start < 10
    assert store.load("hangs") is None


OFFSETS = ["Z", "+00:00", "+0000", "+05:30", "-0800", "+14:00", "-12:00", ""]


def test_time_stamps_keep_their_offset() -> None:
    from datetime import datetime, timedelta

    from primenb.protocol.record import iso_to_epoch

    base = datetime(2026, 12, 3, 4, 0, 0, tzinfo=UTC)
    for offset in OFFSETS[:-1]:
        sign = -1 if offset.startswith("-") else 1
        digits = offset.strip("+-Z").replace(":", "") or "0000"
        delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:])) * sign
        local = (base + delta).replace(tzinfo=None).isoformat()
        assert iso_to_epoch(local + offset) == base.timestamp(), offset
    # a start in one zone and an end in another: the duration is the real one, never negative
    assert iso_to_epoch("2026-12-03T05:30:00+01:00") - iso_to_epoch("2026-12-03T04:00:00+00:00") == 30 * 60
    assert iso_to_epoch("2026-12-03T04:00:00") == time.mktime((2026, 12, 3, 4, 0, 0, 0, 0, -1))
    for junk in ("", None, "yesterday", "2026-13-40T99:00:00", 5, "2026-12-03T04:00:00+99:00"):
        assert iso_to_epoch(junk) is None  # type: ignore[arg-type]


@pytest.fixture
def own_group() -> Any:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_liveness_without_proc_compares_ps_start_time_or_refuses(
    own_group: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.protocol import liveness

    monkeypatch.setattr(liveness, "has_proc", lambda: False)
    record = liveness.launch_record(own_group.pid)
    assert isinstance(record["start_time"], int)  # from ps
    assert liveness.group_alive(record) is True
    reused = {**record, "start_time": record["start_time"] - 3600}  # a group that started an hour earlier
    assert liveness.group_alive(reused) is False
    assert liveness.signal_group(reused, signal.SIGTERM) is False
    unknown = {**record, "start_time": None}
    assert liveness.group_alive(unknown) is None and liveness.signal_group(unknown, signal.SIGTERM) is False
    monkeypatch.setattr(liveness, "_ps_start_time", lambda pid: None)  # no ps either
    assert liveness.signal_group(record, signal.SIGTERM) is False
    assert own_group.poll() is None  # never signalled
