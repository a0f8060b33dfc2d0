"""`eval`: evaluate models and traces through a served endpoint (`primenb eval`, `%prime_eval`)."""

from __future__ import annotations

from typing import Any

from primenb.commands import EvalArgs
from primenb.verbs import Face, as_json


def eval_(args: EvalArgs, face: Face) -> Any:
    from primenb.serve.verbs import eval_run

    result = eval_run(args)
    if args.json:  # the whole result: how it was taken, the summary rows and every rollout
        face.say(as_json(result.to_json_doc()))
        return None
    face.figure(result.chart)
    return result
