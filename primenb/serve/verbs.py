"""The serve and eval verbs, one entry function each, over their typed arguments (declared in
`primenb.commands`). The handlers in `primenb.verbs` call these and only format what they return."""

from __future__ import annotations

from typing import Any

from primenb.commands import (
    EvalArgs,
    ServeAddArgs,
    ServeListArgs,
    ServeRemoveArgs,
    ServeStartArgs,
    ServeStopArgs,
    work_values,
)
from primenb.serve import client


def serve_start(args: ServeStartArgs) -> client.Server:
    return client.start(**work_values(args))  # whole: its fields are `client.start`'s parameters


def serve_add(args: ServeAddArgs) -> list[str]:
    return client.add(args.trace, server=client.find(args.server) if args.server else None)


def serve_remove(args: ServeRemoveArgs) -> str:
    return client.remove(args.trace, server=client.find(args.server) if args.server else None)


def serve_list(args: ServeListArgs) -> Any:
    return client.table()


def serve_stop(args: ServeStopArgs) -> list[str]:
    return client.stop(args.server)


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    from primenb.envs.catalog import parse_assignments as parse

    return dict(parse(pairs))


def eval_run(args: EvalArgs) -> Any:
    from primenb.serve.evaluate import run

    return run(args, env_args=parse_assignments(args.args))


__all__ = [
    "eval_run",
    "serve_add",
    "serve_list",
    "serve_remove",
    "serve_start",
    "serve_stop",
]
