"""primenb: the Prime Intellect fine-tuning workflow in Jupyter.

`%load_ext primenb` registers the magics. Importing this package stays cheap: the config
schema, pandas and the training stack are imported only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from primenb import harness as harness
    from primenb.config import Config
    from primenb.notebook.browser import HarnessBrowser as HarnessBrowser
    from primenb.notebook.builder import ConfigBuilder as ConfigBuilder
    from primenb.protocol.fields import Mode


def load_config(source: str, *, mode: Mode | None = None) -> Config:
    """Validate a prime-rl style TOML (text or a path) and return a `Config`.

    Raises `primenb.errors.ConfigError` listing every problem found.
    """
    import primenb.backends  # noqa: F401  (registers each backend's config rules: hosted ones show here)
    from primenb.config import load_config as _load

    return _load(source, mode=mode)


def attach(name_or_dir: str) -> Any:
    """Re-attach to a run by name or directory (after a kernel restart, or from a terminal)."""
    from primenb.backends import attach as _attach

    return _attach(name_or_dir)


def load(ref: Any, **kwargs: Any) -> Any:
    """(model, tokenizer) of a trained run or trace: its final model, or base + adapter."""
    from primenb.harness import load as _load

    return _load(ref, **kwargs)


def generate(ref: Any, prompts: Any, **sampling: Any) -> Any:
    """Completions from a trained run or trace for one prompt or a list of prompts."""
    from primenb.harness import generate as _generate

    return _generate(ref, prompts, **sampling)


def load_ipython_extension(ipython: Any) -> None:
    from primenb.notebook.magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from primenb.notebook.magics import unregister

    unregister(ipython)


def __getattr__(name: str) -> Any:
    # `__version__` from the installed package metadata (pyproject.toml is the one place it is
    # written), read on first use: importlib.metadata costs ~100 ms, too much for %load_ext.
    if name == "__version__":
        from primenb.protocol.sysinfo import primenb_version

        return primenb_version()
    if name in _SUBPACKAGES:  # `primenb.harness.traces()` after a bare `import primenb` (docs/harness.md)
        import importlib

        return importlib.import_module(f"primenb.{name}")
    if name in _WIDGETS:  # ipywidgets and ipydatagrid load only when a widget is asked for
        import importlib

        return getattr(importlib.import_module(_WIDGETS[name]), name)
    raise AttributeError(f"module 'primenb' has no attribute {name!r}")


# importing these is cheap (each loads pandas or torch on first use), yet only on first access
_SUBPACKAGES = ("harness",)
_WIDGETS = {"ConfigBuilder": "primenb.notebook.builder", "HarnessBrowser": "primenb.notebook.browser"}
