"""`serve ...`: start, add, remove, list, stop model servers (`primenb serve`, `%prime_serve`);
the work is in `primenb.serve.verbs`."""

from __future__ import annotations

import json
from typing import Any

from primenb.commands import ServeAddArgs, ServeListArgs, ServeRemoveArgs, ServeStartArgs, ServeStopArgs
from primenb.verbs import Face, Table, as_json


def start(args: ServeStartArgs, face: Face) -> Any:
    from primenb.serve.verbs import serve_start

    server = serve_start(args)
    if args.json:
        face.say(json.dumps({"url": server.url, "pid": server.pid, "models": server.models}))
        return None
    return server


def add(args: ServeAddArgs, face: Face) -> None:
    from primenb.serve.verbs import serve_add

    served = serve_add(args)
    face.say(json.dumps(served) if args.json else "now serving " + ", ".join(served))


def remove(args: ServeRemoveArgs, face: Face) -> None:
    from primenb.serve.verbs import serve_remove

    face.say(f"removed {serve_remove(args)}")


def list_(args: ServeListArgs, face: Face) -> Any:
    from primenb.serve.verbs import serve_list

    frame = serve_list(args)
    table = Table(frame.to_dict("records"), list(frame.columns))
    if args.json:
        face.say(as_json(table))
        return None
    if not table.rows:  # a header-only table says less than this
        face.say("no primenb server is running; start one with %prime_serve TRACE (or: primenb serve TRACE)")
        return None
    return table


def stop(args: ServeStopArgs, face: Face) -> None:
    from primenb.serve.verbs import serve_stop

    face.say("stopped " + (", ".join(serve_stop(args)) or "nothing"))
