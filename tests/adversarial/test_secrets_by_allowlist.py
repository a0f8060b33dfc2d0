"""Issue 22, class "secrets by allow-list, not by pattern": a trace records only environment
variables on an explicit list of harmless names; backend ``env=`` takes names, never values; and
redaction is linear on every repeated fragment its patterns start with."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

SECRET = "hf_LeakedValue0123456789abcdefXYZ"
WORDS = ("TOKEN", "KEY", "SECRET", "SECRETS", "PASSWORD", "PASS", "PWD", "AUTH", "CREDENTIAL", "CERT", "PRIVATE")
PREFIXES = ("HF_", "HF_HUB_", "CUDA_", "TORCH_", "TRANSFORMERS_", "ACCELERATE_", "NCCL_", "OMP_", "MKL_", "")
SUFFIXES = ("", "_WRITE", "2", "_V2", "_FILE", "S")


def hostile_names() -> list[str]:
    """Every prefix x word x suffix (HF_TOKEN_WRITE, HF_KEY, HF_HUB_TOKEN2, CUDA_SECRETS,
    HF_PASSWORD_V2, ...), plus innocent-looking names under the prefixes a pattern would take."""
    names = {f"{p}{w}{s}" for p, w, s in itertools.product(PREFIXES, WORDS, SUFFIXES)}
    names |= {f"{p}ENDPOINT" for p in PREFIXES} | {"HF_HOME", "TORCH_HOME", "CUDA_PATH", "NCCL_SOCKET_IFNAME"}
    return sorted(names)


def test_secret_env_names_trace_records_only_allowlisted_names() -> None:
    from primenb.protocol.sysinfo import SAFE_ENV_NAMES, env_vars

    environ = {name: SECRET for name in hostile_names() if name not in SAFE_ENV_NAMES}
    environ |= {"CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "4", "HF_HUB_OFFLINE": "1"}
    recorded = env_vars(environ)
    assert SECRET not in json.dumps(recorded)
    assert set(recorded) <= SAFE_ENV_NAMES
    assert recorded == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "4"}
    # an allow-listed name holding something that is not a setting is not recorded either
    assert env_vars({"OMP_NUM_THREADS": "x" * 1000, "CUDA_VISIBLE_DEVICES": "0\n1"}) == {}


def test_secret_env_names_backend_env_takes_names_never_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from primenb.backends.spec import BackendSpecError, add

    monkeypatch.setenv("PRIME_HOME", str(tmp_path))
    values = [SECRET, "https://user:urlpassZX81q@hub.example", "plain", "a b", "$(id)"]
    names = ["HF_ENDPOINT", "MY_VAR", "MODE", "PYTHONPATH"]
    for name, value in itertools.product(names, values):
        with pytest.raises(BackendSpecError, match="names only"):
            add("leaky", "ssh://box", [f"env={name}={value}"])
    for bad in ("-x", "A B", "$(id)", "A;B", "1ABC", "A\nB", "A'B"):
        with pytest.raises(BackendSpecError, match="not a variable name"):
            add("leaky", "ssh://box", [f"env={bad}"])
    assert not (tmp_path / "backends" / "leaky.json").exists()
    spec = add("ok", "ssh://box", ["env=HF_TOKEN,MODE"])
    assert spec.env == ["HF_TOKEN", "MODE"]


def test_secret_env_names_slurm_script_holds_no_value() -> None:
    """The batch script (saved in the run directory) has no exports of env= values at all."""
    import inspect

    from primenb.backends.slurm_script import batch_script

    assert "exports" not in inspect.signature(batch_script).parameters


def test_secret_env_names_ssh_exports_read_values_at_submit_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from primenb.backends.spec import BackendSpecError
    from primenb.backends.ssh import env_exports

    monkeypatch.setenv("HF_TOKEN", "it's $(id) `x`")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    exports, missing = env_exports(["HF_TOKEN", "NOT_SET_ANYWHERE"])
    assert exports == "export HF_TOKEN='it'\"'\"'s $(id) `x`'" and missing == ["NOT_SET_ANYWHERE"]
    for saved in (["MODE=fast"], ["AB\n"], ["-x"]):  # an old or edited saved backend is not sent
        with pytest.raises(BackendSpecError):
            env_exports(saved)


# each pattern's opening fragment, repeated: a pattern that can fail late would try every copy
UNITS = ("eyJ", "eyJ" + "a" * 25 + ".", "hf_", "sk-", "pk-", "ghp_", "xoxb-", "AKIA", "a://b:", "x://", "--token ",
         "--a=", "token=", "a=", "-a ", "a.", "u:p@")  # fmt: skip


def _best(text: str) -> float:
    from primenb.protocol.hashing import redact_text

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        redact_text(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("unit", UNITS)
def test_secret_redaction_is_linear(unit: str) -> None:
    """10x the input costs about 10x the time (quadratic: 100x). The ratio is loose (< 40) so a
    busy machine does not fail it; the quadratic `eyJ...` of issue 22 gave over 300."""
    small, large = _best(unit * (10_000 // len(unit))), _best(unit * (100_000 // len(unit)))
    assert large / max(small, 2e-3) < 40, (unit, small, large)
