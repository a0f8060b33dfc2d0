"""`%prime_train ... --backend modelfactory`: launch (after the confirm widget, or at once with
``--yes``), pause, and resume hosted runs from a cell."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from primenb.errors import PrimenbError

if TYPE_CHECKING:
    from primenb.config import Config


def _backend(args: argparse.Namespace, *, yes: bool) -> Any:
    from primenb.backends.modelfactory import ModelFactoryBackend

    return ModelFactoryBackend(gpu_type=args.gpu_type, volume=args.volume, team=args.team, yes=yes)


def launch(config: Config, args: argparse.Namespace) -> Any:
    """Check and quote here; launch now with ``--yes``, else on the widget's Launch button."""
    from primenb.notebook.confirm import LaunchConfirm
    from primenb.notebook.monitor import follow_in_cell

    backend = _backend(args, yes=True)  # the question is asked here, not inside the backend
    quote = backend.prepare(config)
    if args.yes:
        return follow_in_cell(backend.launch(config, quote, name=args.name), wait=args.wait)
    return LaunchConfirm(quote, lambda: backend.launch(config, quote, name=args.name))


def pause_or_resume(args: argparse.Namespace) -> Any:
    from primenb.backends import attach
    from primenb.backends.modelfactory import HostedControl, Quote
    from primenb.backends.remote import read_remote
    from primenb.notebook.confirm import LaunchConfirm
    from primenb.notebook.monitor import follow_in_cell

    run = attach(args.pause or args.resume)
    control = getattr(run, "_control", None)
    if not isinstance(control, HostedControl):
        raise PrimenbError(f"{run.name} is not a hosted run: --pause and --resume are for --backend modelfactory runs")
    if args.pause:
        state = control.pause()
        print(f"{run.name}: {state}; continue it later with %prime_train --resume {run.name}")
        return run
    backend = _backend(args, yes=True)
    if args.yes:
        return follow_in_cell(backend.resume(run, name=args.name), wait=args.wait)
    info = read_remote(run.dir)
    quote = Quote(info.get("gpu_type"), info.get("price_per_gpu_hour"), int(info.get("gpus") or 1), backend.cli.team)
    return LaunchConfirm(quote, lambda: backend.resume(run, name=args.name), what="Resume")


__all__ = ["launch", "pause_or_resume"]
