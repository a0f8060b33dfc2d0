"""Each command's one handler, keyed by its argument class (`primenb.commands`): a function
reference the type checker follows, and checks against the class it is registered for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from primenb import commands as c
from primenb.verbs import Face, backend, env, harness, serve, train, warnings_to
from primenb.verbs import eval as evaluate

A = TypeVar("A")
Handler = Callable[[A, Face], Any]

HANDLERS: dict[type, Handler[Any]] = {}


def on(args_type: type[A], fn: Handler[A]) -> None:
    """Register ``fn`` as the handler of the command whose arguments are ``args_type``."""
    if args_type in HANDLERS:
        raise ValueError(f"{args_type.__name__} has a handler already: {HANDLERS[args_type].__qualname__}")
    HANDLERS[args_type] = fn


on(c.ValidateArgs, train.validate)
on(c.RltomlArgs, train.rltoml)
on(c.InitArgs, train.init)
on(c.TrainArgs, train.train)
on(c.StopArgs, train.stop)
on(c.AttachArgs, train.attach)
on(c.PauseArgs, train.pause)
on(c.ResumeArgs, train.resume)
on(c.UiArgs, train.ui)
on(c.HarnessShowArgs, harness.show)
on(c.HarnessApplyArgs, harness.apply)
on(c.HarnessRerunArgs, harness.rerun)
on(c.HarnessDiffArgs, harness.diff)
on(c.HarnessCompareArgs, harness.compare)
on(c.HarnessReindexArgs, harness.reindex)
on(c.HarnessExportArgs, harness.export)
on(c.HarnessImportArgs, harness.import_)
on(c.HarnessRmArgs, harness.rm)
on(c.EnvListArgs, env.list_)
on(c.EnvAddArgs, env.add)
on(c.EnvShowArgs, env.show)
on(c.EnvRemoveArgs, env.remove)
on(c.BackendAddArgs, backend.add)
on(c.BackendListArgs, backend.list_)
on(c.BackendShowArgs, backend.show)
on(c.BackendRemoveArgs, backend.remove)
on(c.ServeStartArgs, serve.start)
on(c.ServeAddArgs, serve.add)
on(c.ServeRemoveArgs, serve.remove)
on(c.ServeListArgs, serve.list_)
on(c.ServeStopArgs, serve.stop)
on(c.EvalArgs, evaluate.eval_)


def handler(cmd: c.Command) -> Handler[Any]:
    """The one handler of ``cmd`` (both faces call it)."""
    return HANDLERS[cmd.type]


def call(cmd: c.Command, args: Any, face: Face) -> Any:
    """Run ``cmd``'s handler on its typed ``args``; a `HarnessWarning` raised on the way reaches the
    user through the face."""
    if not isinstance(args, cmd.type):
        raise TypeError(f"{cmd.family} {cmd.name} takes {cmd.type.__name__}, not {type(args).__name__}")
    import primenb.backends  # noqa: F401  (registers each backend's config rules before a handler validates)

    with warnings_to(face):
        return handler(cmd)(args, face)


__all__ = ["HANDLERS", "Handler", "call", "handler", "on"]
