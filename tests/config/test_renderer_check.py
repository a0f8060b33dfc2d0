"""The model -> renderer decision upstream makes (issue 32): `renderers`' MODEL_RENDERER_MAP
decides `auto`, SFT needs a typed renderer. primenb reads the installed package's map, or the
generated table of the same facts where the package is absent or of the table's version."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from primenb.config import check, renderer_check
from primenb.config import renderer_map as table
from primenb.config.templates import starter

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_table_is_the_installed_packages_map() -> None:
    """renderers is installed with verifiers (a test dependency): the table must be its map, of
    its version; regenerate with tests/config/generate_renderer_map.py when it moves."""
    from renderers.base import MODEL_RENDERER_MAP

    assert importlib.metadata.version("renderers") == table.RENDERERS_VERSION
    assert dict(MODEL_RENDERER_MAP) == table.MODEL_RENDERER_MAP
    generated = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "config" / "generate_renderer_map.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert generated == (ROOT / "primenb" / "config" / "renderer_map.py").read_text()


def test_the_installed_package_decides_when_its_version_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda d: "9.9.9" if d == "renderers" else real(d))
    monkeypatch.setitem(sys.modules, "renderers.base", type(sys)("renderers.base"))
    sys.modules["renderers.base"].MODEL_RENDERER_MAP = {"org/only-here": "qwen3"}  # type: ignore[attr-defined]
    renderer_check.renderer_map.cache_clear()
    try:
        assert dict(renderer_check.renderer_map()) == {"org/only-here": "qwen3"}
    finally:
        renderer_check.renderer_map.cache_clear()


def test_without_the_package_the_table_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(dist: str) -> str:
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    renderer_check.renderer_map.cache_clear()
    try:
        assert renderer_check.renderer_map() is table.MODEL_RENDERER_MAP
    finally:
        renderer_check.renderer_map.cache_clear()


@pytest.mark.parametrize(
    ("name", "near"),
    [
        ("qwen/qwen3-4b-instruct-2507", "Qwen/Qwen3-4B-Instruct-2507"),  # lower-cased
        (" Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B-Instruct-2507"),  # padded
        ("Qwen/Qwen2.5-7B-Instruct", None),  # a model the map does not know
    ],
)
def test_rl_auto_renderer_names_the_model_and_the_way_out(name: str, near: str | None) -> None:
    text = starter().replace('name = "primenb/tiny-byte"', f'name = "{name}"')
    [err] = check(text, mode="rl").report.errors
    assert err.path == "model.name" and err.line and "MODEL_RENDERER_MAP" in err.message
    assert 'name = "default"' in err.hint
    assert (f"did you mean `{near}`" in err.hint) if near else "did you mean" not in err.hint
    explicit = text + '\n[orchestrator.renderer]\nname = "default"\n'
    assert check(explicit, mode="rl").report.ok


def test_sft_needs_a_typed_renderer() -> None:
    text = starter(sft=True).replace('name = "primenb/tiny-byte"', 'name = "my-org/my-finetune"')
    [err] = check(text, mode="sft").report.errors
    assert err.path == "model.name" and "typed renderer" in err.message
    [err] = check(text + '\n[renderer]\nname = "default"\n', mode="sft").report.errors
    assert err.path == "renderer.name" and "DefaultRenderer" in err.message
    assert check(text + '\n[renderer]\nname = "qwen3"\n', mode="sft").report.ok


def test_the_tokenizer_decides_over_the_model() -> None:
    text = starter().replace('name = "primenb/tiny-byte"', 'name = "my-org/my-finetune"')
    assert check(text + '\n[tokenizer]\nname = "Qwen/Qwen3-0.6B"\n', mode="rl").report.ok


def test_embedded_models_are_outside_the_rule() -> None:
    """primenb's own byte-level models have no hub repository: upstream cannot load them at all,
    and the local engine renders them itself."""
    assert check(starter(), mode="rl").report.ok and check(starter(sft=True), mode="sft").report.ok
