"""The one backend registry (`primenb.backends.registry.BACKENDS`): choosing a backend, its
capabilities, the names a saved backend may not take, and the config rules each backend adds are
all read from it; a capability flag and the method it promises cannot disagree (issue 33)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from primenb.backends import backend_class, capabilities, get_backend, run_backend, serves_on_host
from primenb.backends.base import OPTIONAL, Backend, Capabilities
from primenb.backends.registry import BACKENDS, SCHEMES
from primenb.backends.spec import BackendSpecError, add, resolve
from primenb.config import check
from primenb.config.backend_rules import rules_for
from primenb.protocol.fields import DEFAULT_BACKEND
from tests.tiny import rl_toml

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_is_built_and_described_by_its_registered_class(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path))
    assert set(BACKENDS) == {"local", "ssh", "slurm", "modelfactory"}  # what users name today
    for kind, cls in BACKENDS.items():
        assert cls.name == kind
        assert type(get_backend(kind)) is cls, kind
        assert capabilities(kind) is cls.capabilities and backend_class(kind) is cls
        assert serves_on_host(kind) is cls.capabilities.serves_on_host
    for scheme in SCHEMES:  # a URL and a saved name have their kind's class (slurm included)
        url = f"{scheme}://login-host/~/runs"
        assert type(get_backend(url)) is BACKENDS[scheme] and capabilities(url) is BACKENDS[scheme].capabilities
        add(f"my-{scheme}", url)
        assert backend_class(f"my-{scheme}") is BACKENDS[scheme] and resolve(f"my-{scheme}").kind == scheme
    assert capabilities("ssh://box").serves_on_host and not capabilities("slurm://box").serves_on_host
    assert capabilities("no-such-backend") == Capabilities() and backend_class("no-such-backend") is None
    assert get_backend("modelfactory", gpu_type="H100_80GB").gpu_type == "H100_80GB"  # launch options reach it


def test_nothing_recorded_means_the_default_backend_which_is_registered(tmp_path: Path) -> None:
    assert DEFAULT_BACKEND in BACKENDS  # protocol/ names it (config and engine read it) and cannot import us
    assert capabilities(None) is BACKENDS[DEFAULT_BACKEND].capabilities
    assert run_backend(tmp_path) == DEFAULT_BACKEND  # a run directory with no status
    assert check(rl_toml()).model.primenb.backend == DEFAULT_BACKEND


def test_a_saved_backend_may_not_take_a_kinds_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path))
    for kind in BACKENDS:
        with pytest.raises(BackendSpecError, match="not one of local, ssh, slurm, modelfactory"):
            add(kind, "ssh://box")
    with pytest.raises(BackendSpecError, match="not a backend URL"):
        add("hosted", "modelfactory")  # built from launch options: nothing to save


def test_each_registered_class_overrides_exactly_the_operations_its_capabilities_declare() -> None:
    for cls in BACKENDS.values():
        for op, declared in OPTIONAL.items():
            overridden = getattr(cls, op) is not getattr(Backend, op)
            assert overridden == declared(cls.capabilities), f"{cls.__name__}.{op}"


def _backend(caps: Capabilities, **methods: Any) -> type[Backend]:
    body: dict[str, Any] = {
        "name": "test",
        "capabilities": caps,
        "submit": lambda self, config, *, name=None, lineage=None: None,
        "open": lambda self, run_dir: None,
        **methods,
    }
    return type("TestBackend", (Backend,), body)


def test_a_flag_without_its_method_or_a_method_without_its_flag_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match="disagree on pause, resume"):
        _backend(Capabilities(pausable=True))  # says it pauses, cannot
    with pytest.raises(TypeError, match="disagree on account"):
        _backend(Capabilities(), account=lambda self: "who pays")  # can, but nobody would ask
    ok = _backend(Capabilities(serves_on_host=True), serve_host=lambda self, run_dir: "host")
    assert ok.capabilities.serves_on_host


def test_each_backends_config_rules_apply_to_the_configs_that_name_it() -> None:
    for kind, cls in BACKENDS.items():
        assert rules_for(kind) is cls.config_rules, kind

    def limit(backend: str) -> str:
        text = rl_toml(primenb=f'backend = "{backend}"' if backend else "").replace("max_steps = 4", "max_steps = -5")
        [d] = [d for d in check(text).report.warnings if d.code == "local-limit"]
        return d.message

    assert "refuses it at launch" in limit("") and "refuses it at launch" in limit("local")
    assert "only the local engine refuses it" in limit("slurm")
    hosted = "clean = true\n" + rl_toml(primenb='backend = "modelfactory"', extra="[inference]\n")
    assert [d.path for d in check(hosted).report.errors] == ["clean"]
    assert check(hosted.replace('"modelfactory"', '"local"')).model is not None


@pytest.mark.parametrize("face", ["cli", "api"])
def test_a_fresh_process_validating_through_a_face_gets_the_platforms_rules(tmp_path: Path, face: str) -> None:
    """Registration happens when `primenb.backends` is imported: the command dispatcher and
    `primenb.load_config` import it, so the hosted rules show without importing a backend first."""
    path = tmp_path / "rl.toml"
    path.write_text("clean = true\n" + rl_toml(primenb='backend = "modelfactory"', extra="[inference]\n"))
    if face == "cli":
        cmd = [sys.executable, "-m", "primenb.cli", "validate", str(path)]
    else:
        code = "import sys, primenb\ntry:\n    primenb.load_config(sys.argv[1])\nexcept Exception as e:\n    print(e)"
        cmd = [sys.executable, "-c", code, str(path)]
    env = {**os.environ, "PRIME_HOME": str(tmp_path / "home")}
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert "a hosted run cannot use `clean = true`" in out.stdout + out.stderr
