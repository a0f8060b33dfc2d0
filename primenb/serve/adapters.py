"""The rules of the routes that add and remove models at run time (`primenb.serve.app`).

- **Loading** (``POST /v1/load_lora_adapter``, ``POST /admin/models``): a checkpoint of a run whose
  directory holds a trace is served as ``primenb serve`` serves that trace (`client.model_specs`):
  with the prompt format the trace recorded, taken as plain data whoever made the trace (a request
  names the folder: nothing in it is imported or built), its model and seed, its trace
  id, and its parent: the trace's SFT warm-up when this server serves it, else its base model. What
  the request itself sets wins.
- **Unloading** (``POST /v1/unload_lora_adapter``): as vLLM, only a LoRA adapter the server serves,
  loaded at start or at run time; a base model or a full fine-tune (which is what adapters sit on:
  a base, or a warm-up) is a 404. ``DELETE /admin/models/{id}`` removes anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.errors import PrimenbError
from primenb.protocol.reader import is_regular
from primenb.protocol.rundir import RunDir
from primenb.protocol.stage import FINAL, SFT_WARMUP, parse_stage
from primenb.protocol.weights import ADAPTER, BASE, FULL
from primenb.serve.guard import run_dir_of

WARMUP = SFT_WARMUP  # the name serve/evaluate.py imported


def _warmup_served(cards: dict[str, dict[str, Any]], trace_id: str) -> str | None:
    for card in cards.values():
        info = card.get("primenb") or {}
        if info.get("trace") == trace_id and info.get("stage") == SFT_WARMUP:
            return str(card["id"])
    return None


def from_trace(checkpoint: Path, given: dict[str, Any], cards: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the trace of ``checkpoint``'s run directory says about serving it, for the fields of
    ``given`` (an `AddModel`'s, those the request set) left unset; {} without a readable trace.
    Reads files: call it off the event loop."""
    from primenb.harness.inference import describe
    from primenb.traces.trace import Trace
    from primenb.traces.trust import recorded_prompt_format

    run = run_dir_of(checkpoint)
    if run is None or not is_regular(RunDir(run).trace_path):
        return {}
    try:
        trace = Trace.load(run)
        info = describe(trace, checkpoint)
    except (PrimenbError, AttributeError, KeyError, TypeError, ValueError):  # a broken trace: served as asked
        return {}
    model_name = str(given.get("model_name") or info.model_id)
    warmup = checkpoint == Path(RunDir(run).warmup_checkpoint).resolve()
    stage = parse_stage(given.get("stage") or (SFT_WARMUP if warmup else FINAL))
    parent = model_name if stage == SFT_WARMUP else (_warmup_served(cards, trace.id) or model_name)
    found = {
        "model_name": model_name,
        "seed": info.base_seed,
        "trace": trace.id,
        "trace_name": trace.name,
        "stage": stage,
        "parent": parent,
    }
    if "text_template" not in given:
        found["text_template"] = recorded_prompt_format(trace)
    return {k: v for k, v in found.items() if k not in given}


def check_unload(entries: dict[str, Any], served_id: str) -> None:
    """Raise the 404 vLLM answers unless ``served_id`` is a LoRA adapter this server serves."""
    entry = entries.get(served_id)
    shown = served_id if len(served_id) <= 80 else served_id[:80] + "…"
    if entry is None:
        raise ServeError(
            f"The LoRA adapter {shown!r} cannot be found.", ErrorKind.NOT_FOUND, "lora_name", "model_not_found"
        )
    if entry.kind != ADAPTER:
        what = {BASE: "a base model", FULL: "a full fine-tune"}.get(entry.kind, f"a {entry.kind} model")
        raise ServeError(
            f"{shown!r} is {what}, not a LoRA adapter: /v1/unload_lora_adapter removes only LoRA adapters "
            "(loaded at start or with /v1/load_lora_adapter); DELETE /admin/models/{id} removes any model.",
            ErrorKind.NOT_FOUND,
            "lora_name",
            "model_not_found",
        )


__all__ = ["check_unload", "from_trace"]
