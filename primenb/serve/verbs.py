"""The serve and eval verbs, one entry function each, over parsed arguments (the declarations in
`primenb.commands`). The magics and the CLI call these and only format what they return."""

from __future__ import annotations

import argparse
from typing import Any

from primenb.serve import client

SUBCOMMANDS = ("add", "remove", "list", "stop")


def split(words: list[str]) -> tuple[str, list[str]]:
    """``(subcommand, rest)``: ``add``/``remove``/``list``/``stop``, else ``start`` (the bare form)."""
    if words and words[0] in SUBCOMMANDS:
        return words[0], words[1:]
    return "start", words


def serve_start(args: argparse.Namespace) -> client.Server:
    return client.start(
        args.traces,
        base=args.base,
        port=args.port,
        host=args.host,
        api_key_var=args.api_key_var,
        max_batch=args.max_batch,
        max_queue=args.max_queue,
    )


def serve_add(args: argparse.Namespace) -> list[str]:
    return client.add(args.trace, server=client.find(args.server) if args.server else None)


def serve_remove(args: argparse.Namespace) -> str:
    return client.remove(args.trace, server=client.find(args.server) if args.server else None)


def serve_list(args: argparse.Namespace) -> Any:
    return client.table()


def serve_stop(args: argparse.Namespace) -> list[str]:
    return client.stop(args.server)


HANDLERS = {"start": serve_start, "add": serve_add, "remove": serve_remove, "list": serve_list, "stop": serve_stop}


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    from primenb.envs.catalog import parse_assignments as parse

    return dict(parse(pairs))


def eval_run(args: argparse.Namespace) -> Any:
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
        trust=getattr(args, "trust", False),
    )


__all__ = [
    "HANDLERS",
    "SUBCOMMANDS",
    "eval_run",
    "serve_add",
    "serve_list",
    "serve_remove",
    "serve_start",
    "serve_stop",
    "split",
]
