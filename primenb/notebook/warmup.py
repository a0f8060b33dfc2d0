"""Imports done ahead of time, in a background thread, when the extension loads: the first
%%rltoml would otherwise wait seconds for the config schema (and the renderer classes it checks
against), and a cold first %prime_train spent about a second importing the launch path and the
monitor (ipywidgets). Never the training stack."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import threading

CONFIG = ("primenb.config.loader",)
LAUNCH = ("primenb.backends.local", "primenb.harness.refine", "primenb.notebook.monitor", "primenb.verbs.train")


def _work(launch: bool) -> None:
    with contextlib.suppress(Exception):
        for name in CONFIG:
            importlib.import_module(name)
        if importlib.util.find_spec("renderers") is not None:
            importlib.import_module("renderers.configs")
    if launch:
        with contextlib.suppress(Exception):
            for name in LAUNCH:
                importlib.import_module(name)


def warm_up(*, launch: bool = False) -> None:
    """Start the imports (``launch``: also the launch path and the monitor, in a kernel)."""
    threading.Thread(target=_work, args=(launch,), name="primenb-warm-up", daemon=True).start()


__all__ = ["warm_up"]
