"""The serve and eval verbs, one entry function each, over their typed arguments (declared in
`primenb.commands`). The handlers in `primenb.verbs` call these and only format what they return."""

from __future__ import annotations

from typing import Any

from primenb.commands import EvalArgs, ServeAddArgs, ServeListArgs, ServeRemoveArgs, ServeStartArgs, ServeStopArgs
from primenb.serve import client


def serve_start(args: ServeStartArgs) -> client.Server:
    return client.start(
        args.traces,
        base=args.base,
        port=args.port,
        host=args.host,
        api_key_var=args.api_key_var,
        max_batch=args.max_batch,
        max_queue=args.max_queue,
        stream_interval=args.stream_interval,
    )


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
    from primenb.serve.evaluate import evaluate

    return evaluate(
        list(args.models),
        args.env,
        args=parse_assignments(args.args),
        num_examples=args.num_examples,
        rollouts=args.rollouts,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        seed=args.seed,
        pass_reward=args.pass_reward,
        keep_server=args.keep_server,
        trust=args.trust,
    )


__all__ = [
    "eval_run",
    "serve_add",
    "serve_list",
    "serve_remove",
    "serve_start",
    "serve_stop",
]
