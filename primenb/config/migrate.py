"""Legacy prime-rl / prime CLI config shapes, migrated to the current schema.

Each finding is an error (prime-rl rejects every legacy key: a config it would refuse never
trains here either), located at the legacy key, with the migration as its hint. It also changes
the parsed dict (so the rest of validation sees the current shape and reports what else is wrong)
and records a text edit (so `--fix` rewrites the TOML with its comments and layout kept).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import tomlkit

from primenb.config.diagnostics import Diagnostic, format_path
from primenb.config.positions import Path, Positions, TablePath
from primenb.config.textedit import TextEdits
from primenb.protocol.fields import MISSING, lookup

ASYNC_KEYS = ("max_async_level", "strict_async_level")
HOSTED_KEYS = {
    "loss": "choose the mode by file: an rl.toml has [trainer]/[orchestrator], an sft.toml has [data]",
    "learning_rate": "[trainer.optim] lr",
    "lora_alpha": "[trainer.model.lora] alpha",
    "batch_size": "[orchestrator] batch_size",
    "rollouts_per_example": "[orchestrator] group_size",
    "max_inflight_rollouts": "[orchestrator.concurrency] max_inflight",
    "oversampling_factor": "(removed) size [orchestrator.concurrency] instead",
    "checkpoint_id": "[resume] dir, or primenb's [primenb] init_from",
    "sampling": "[orchestrator.train.sampling] (max_tokens is now max_completion_tokens)",
    "checkpoints": "[ckpt] interval",
    "adapters": "[ckpt] keep_last",
}


@dataclass
class Migration:
    data: dict[str, Any]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    origins: dict[Path, Path] = field(default_factory=dict)  # new path -> path in the text
    edits: TextEdits | None = None
    hosted_shape: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.edits and self.edits._ops)


FIX_HINT = "`primenb validate --fix` or `%%rltoml --fix` rewrites it, comments kept"


def _diag(pos: Positions, path: Path, message: str, hint: str, code: str = "legacy") -> Diagnostic:
    found = pos.locate(path)
    line = col = end = None
    if found:
        _, span = found
        line, col, end = span.line, span.col, span.end_col
    return Diagnostic("error", code, format_path(path), message, hint, line, col, end)


def _value_text(pos: Positions, path: Path) -> str | None:
    span = pos.spans.get(path)
    if span is None or span.value_col is None:
        return None
    return pos.lines[span.line - 1][span.value_col - 1 :].rstrip()


def _render(key: str, value: Any) -> str:
    return f"{key} = {tomlkit.item(value).as_string()}"


class _Migrator:
    def __init__(self, data: dict[str, Any], pos: Positions) -> None:
        self.data = copy.deepcopy(data)
        self.pos = pos
        self.edits = TextEdits(pos.lines)
        self.out = Migration(self.data, edits=self.edits)

    def found(self, path: Path, message: str, hint: str) -> None:
        """A legacy key: an error (prime-rl rejects it) whose hint is the migration."""
        self.out.diagnostics.append(_diag(self.pos, path, message, hint))

    # -- generic moves -------------------------------------------------------------------
    def rename_key(self, table: dict[str, Any], table_path: Path, old: str, new: str, why: str) -> None:
        """Rename a key in the same table (its line keeps its comment)."""
        if new in table:
            self.out.diagnostics.append(
                _diag(
                    self.pos,
                    table_path + (old,),
                    f"both `{old}` (legacy) and `{new}` are set",
                    f"delete `{old}`; `{new}` is its current name",
                )
            )
            table.pop(old)
            return
        table[new] = table.pop(old)
        self.out.origins[table_path + (new,)] = table_path + (old,)
        self.found(
            table_path + (old,),
            f"`{old}` is a legacy key: prime-rl rejects it ({why})",
            f"renamed to `{new}`; {FIX_HINT}",
        )
        span = self.pos.spans.get(table_path + (old,))
        if span and not span.header:
            line = self.pos.lines[span.line - 1]
            key_text = line[span.col - 1 : span.end_col - 1]
            if key_text.endswith(old):
                self.edits.replace_span(span.line, span.end_col - len(old), span.end_col, new)

    def move_table(self, old: Path, new: TablePath, why: str) -> None:
        """Move a whole table (and its sub-tables) to a new path."""
        value = _pop(self.data, old)
        if value is None:
            return
        target = _ensure(self.data, new[:-1])
        if new[-1] in target:
            self.out.diagnostics.append(
                _diag(
                    self.pos,
                    old,
                    f"both [{format_path(old)}] (legacy) and [{format_path(new)}] are set",
                    f"merge them into [{format_path(new)}]",
                )
            )
            return
        target[new[-1]] = value
        self.found(
            old,
            f"[{format_path(old)}] is a legacy table: prime-rl rejects it ({why})",
            f"moved to [{format_path(new)}]; {FIX_HINT}",
        )
        for path, span in list(self.pos.spans.items()):
            if path[: len(old)] != old:
                continue
            self.out.origins[new + path[len(old) :]] = path
            line = self.pos.lines[span.line - 1]
            if span.header:
                bracket = "[[" if line.lstrip().startswith("[[") else "["
                closing = "]]" if bracket == "[[" else "]"
                rest = format_path(new + path[len(old) :])
                self.edits.replace_span(span.line, span.col, span.end_col, f"{bracket}{rest}{closing}")
            else:
                # A dotted key written at the parent level, e.g. `wandb.project = ...`.
                prefix = str(old[-1])
                if line[span.col - 1 :].startswith(prefix + "."):
                    new_prefix = ".".join(str(p) for p in new[len(old) - 1 :])
                    self.edits.replace_span(span.line, span.col, span.col + len(prefix), new_prefix)

    def move_key(self, old: Path, new_table: TablePath, new_key: str, why: str) -> None:
        """Move a single-line key into another table (created at the end when absent)."""
        value = _pop(self.data, old)
        target = _ensure(self.data, new_table)
        target[new_key] = value
        self.out.origins[new_table + (new_key,)] = old
        self.found(
            old,
            f"`{format_path(old)}` is a legacy key: prime-rl rejects it ({why})",
            f"renamed to `{format_path(new_table + (new_key,))}`; {FIX_HINT}",
        )
        span = self.pos.spans.get(old)
        text = _value_text(self.pos, old)
        if span is None or text is None:
            return
        self.edits.delete_lines(span.line, span.line)
        new_line = f"{new_key} = {text}"
        end = self.pos.table_end(new_table)
        if end is not None:
            self.edits.insert_after(end, [new_line])
        else:
            self.edits.insert_after(len(self.pos.lines), ["", f"[{format_path(new_table)}]", new_line])

    def delete_key(self, table: dict[str, Any], path: TablePath, why: str, hint: str) -> None:
        table.pop(path[-1], None)
        self.found(path, f"`{format_path(path)}` was removed upstream: prime-rl rejects it ({why})", hint)
        span = self.pos.spans.get(path)
        if span and not span.header:
            self.edits.delete_lines(span.line, span.line)

    def envs_to_sources(self, parent: Path, old_key: str, new_parent: TablePath, why: str) -> None:
        """`[[orchestrator.env]] id = ...` -> `[[orchestrator.train.source]]` with `env.taskset.id`."""
        container = _get(self.data, parent)
        envs = container.get(old_key)
        if not isinstance(envs, list) or not all(isinstance(e, dict) and "id" in e for e in envs):
            return  # not the legacy shape (`id` per env): the schema reports the unknown key
        container.pop(old_key)
        sources = []
        for element in envs:
            element = dict(element) if isinstance(element, dict) else {}
            taskset = {"id": element.pop("id", None), **(element.pop("args", None) or {})}
            source = {k: v for k, v in element.items()}
            source["env"] = {
                "taskset": taskset,
                "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}},
            }
            sources.append(source)
        target = _ensure(self.data, new_parent)
        if "source" in target:
            self.out.diagnostics.append(
                _diag(
                    self.pos,
                    parent + (old_key,),
                    "both legacy env tables and sources are set",
                    f"move every env into [[{format_path(new_parent + ('source',))}]]",
                )
            )
            return
        target["source"] = sources
        old = parent + (old_key,)
        new = new_parent + ("source",)
        self.found(
            old,
            f"[[{format_path(old)}]] is a legacy table: prime-rl rejects it ({why})",
            f"renamed to [[{format_path(new)}]] with `env.taskset.id`; {FIX_HINT}",
        )
        for i, source in enumerate(sources):
            self.out.origins[new + (i,)] = old + (i,)
            self.out.origins[new + (i, "env", "taskset", "id")] = old + (i, "id")
            span = self.pos.spans.get(old + (i,))
            end = self.pos.table_end(old + (i,)) if span else None
            if span is None or end is None:
                continue
            comments = [ln for ln in self.pos.lines[span.line : end] if ln.lstrip().startswith("#")]
            self.edits.delete_lines(span.line, end)
            self.edits.insert_after(span.line - 1, comments + _source_lines(new, source))

    def rename_value(self, table: dict[str, Any], path: Path, old: str, new: str, why: str) -> None:
        """A retired value (the harness id `"default"`): replaced in the data and in the text."""
        table[str(path[-1])] = new
        self.found(
            path,
            f'`{format_path(path)} = "{old}"` is a legacy value: prime-rl rejects it ({why})',
            f'renamed to `"{new}"`; {FIX_HINT}',
        )
        span = self.pos.spans.get(path)
        if span is None or span.value_col is None:
            return
        line = self.pos.lines[span.line - 1]
        for quote in ('"', "'"):
            at = line.find(f"{quote}{old}{quote}", span.value_col - 1)
            if at >= 0:
                self.edits.replace_span(span.line, at + 1, at + len(old) + 3, f'"{new}"')
                return


def _source_lines(path: Path, source: dict[str, Any]) -> list[str]:
    head = format_path(path)
    lines = [f"[[{head}]]"]
    lines += [_render(k, v) for k, v in source.items() if k != "env"]
    env = source["env"]
    lines += ["", f"[{head}.env.taskset]"] + [_render(k, v) for k, v in env["taskset"].items() if v is not None]
    lines += ["", f"[{head}.env.agent.harness]", _render("id", "null")]
    lines += ["", f"[{head}.env.agent.runtime]", _render("type", "subprocess")]
    return lines


def _get(data: dict[str, Any], path: Path) -> Any:
    value = lookup(data, path)
    if value is MISSING:
        raise KeyError(path)
    return value


def _pop(data: dict[str, Any], path: Path) -> Any:
    try:
        parent = _get(data, path[:-1])
    except (KeyError, IndexError, TypeError):
        return None
    return parent.pop(path[-1], None) if isinstance(parent, dict) else None


def _ensure(data: dict[str, Any], path: TablePath) -> dict[str, Any]:
    cur = data
    for p in path:
        nxt: dict[str, Any] = cur.setdefault(p, {})
        cur = nxt
    return cur


def _is_table(data: dict[str, Any], *path: str) -> bool:
    return isinstance(lookup(data, path), dict)


def _harness_tables(d: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Path]]:
    """Every `env.<role>.harness` table of every source (RL and SFT eval sources)."""
    roots: list[Path] = [("orchestrator", "train"), ("orchestrator", "eval"), ("eval",)]
    for root in roots:
        container = d
        for part in root:
            container = container.get(part) if isinstance(container, dict) else None  # type: ignore[assignment,arg-type]
        sources = container.get("source") if isinstance(container, dict) else None
        for i, src in enumerate(sources if isinstance(sources, list) else []):
            env = src.get("env") if isinstance(src, dict) else None
            for role, seat in env.items() if isinstance(env, dict) else []:
                if isinstance(seat, dict) and isinstance(seat.get("harness"), dict):
                    yield seat["harness"], root + ("source", i, "env", role, "harness")


def migrate(data: dict[str, Any], pos: Positions, mode: str = "rl") -> Migration:
    """Find legacy keys, return the migrated dict with one diagnostic per finding. RL-only
    migrations (orchestrator keys) are left to the schema's unknown-key errors in an SFT config."""
    if isinstance(data.get("model"), str) or isinstance(data.get("env"), list):
        return _explain_hosted(data, pos)
    m = _Migrator(data, pos)
    _rename_default_harness(m)
    if mode == "sft":
        if _is_table(m.data, "wandb"):
            m.move_table(("wandb",), ("monitors", "wandb"), "prime-rl 2026-08, #3275")
        return m.out
    _add_required_sections(m, pos)
    _rollouts_per_example(m)
    for section in ((), ("trainer",), ("orchestrator",)):
        if _is_table(m.data, *section, "wandb"):
            m.move_table(section + ("wandb",), section + ("monitors", "wandb"), "prime-rl 2026-08, #3275")
    _orchestrator_sampling(m)
    _envs_to_sources(m)
    _drop_async_keys(m)
    return m.out


def _rename_default_harness(m: _Migrator) -> None:
    for harness, path in _harness_tables(m.data):
        if harness.get("id") == "default":
            m.rename_value(harness, path + ("id",), "default", "bash", "the `default` harness was renamed to `bash`")


def _add_required_sections(m: _Migrator, pos: Positions) -> None:
    """prime-rl requires [trainer] and [orchestrator] in an RL config; an empty one takes its defaults."""
    d = m.data
    for required in ("trainer", "orchestrator"):
        if required in d:
            continue
        d[required] = {}
        m.out.diagnostics.append(
            _diag(
                pos,
                (required,),
                f"[{required}] is missing: prime-rl requires it in an RL config (Field required)",
                f"add an empty [{required}] (its defaults apply); `primenb validate --fix` or `%%rltoml --fix` adds it",
                code="missing",
            )
        )
        m.edits.insert_after(len(pos.lines), ["", f"[{required}]"])


def _orchestrator(d: dict[str, Any]) -> dict[str, Any] | None:
    orch = d.get("orchestrator")
    return orch if isinstance(orch, dict) else None


def _rollouts_per_example(m: _Migrator) -> None:
    d = m.data
    orch = _orchestrator(d)
    if orch is not None and "rollouts_per_example" in orch:
        m.rename_key(orch, ("orchestrator",), "rollouts_per_example", "group_size", "prime-rl 2026-05, #2599")
    if "rollouts_per_example" in d:
        m.move_key(("rollouts_per_example",), ("orchestrator",), "group_size", "prime-rl 2026-05, #2599")


def _orchestrator_sampling(m: _Migrator) -> None:
    """[orchestrator.sampling] -> [orchestrator.train.sampling]; max_tokens -> max_completion_tokens."""
    d = m.data
    orch = _orchestrator(d)
    if orch is not None and _is_table(orch, "sampling"):
        sampling = orch["sampling"]
        if "max_tokens" in sampling:
            m.rename_key(
                sampling, ("orchestrator", "sampling"), "max_tokens", "max_completion_tokens", "prime-rl 2026-05, #2599"
            )
        m.move_table(("orchestrator", "sampling"), ("orchestrator", "train", "sampling"), "prime-rl 2026-05, #2599")
    for sampling_path in (("orchestrator", "train", "sampling"), ("orchestrator", "eval", "sampling")):
        if _is_table(d, *sampling_path) and "max_tokens" in _get(d, sampling_path):
            m.rename_key(
                _get(d, sampling_path), sampling_path, "max_tokens", "max_completion_tokens", "prime-rl 2026-05, #2599"
            )


def _envs_to_sources(m: _Migrator) -> None:
    """[[orchestrator.env]] / [[orchestrator.train.env]] / [[orchestrator.eval.env]] -> sources."""
    orch = _orchestrator(m.data)
    if orch is None:
        return
    if isinstance(orch.get("env"), list):
        m.envs_to_sources(("orchestrator",), "env", ("orchestrator", "train"), "prime-rl 2026-07, #3150")
    for part in ("train", "eval"):
        if _is_table(orch, part) and isinstance(orch[part].get("env"), list):
            m.envs_to_sources(("orchestrator", part), "env", ("orchestrator", part), "prime-rl 2026-07, #3150")


def _drop_async_keys(m: _Migrator) -> None:
    d = m.data
    for section in ((), ("orchestrator",), ("trainer",)):
        table = _get(d, section) if not section or _is_table(d, *section) else None
        for key in ASYNC_KEYS:
            if table is not None and key in table:
                m.delete_key(
                    table,
                    section + (key,),
                    "prime-rl 2026-05, #2631",
                    "delete it: async is now a fixed one-step overlap",
                )


def _explain_hosted(data: dict[str, Any], pos: Positions) -> Migration:
    out = Migration(copy.deepcopy(data), hosted_shape=True)
    shape = "the retired hosted-training (shared LoRA) shape, which prime CLI 0.18 rejects"
    if isinstance(data.get("model"), str):
        out.diagnostics.append(
            _diag(
                pos,
                ("model",),
                f'top-level `model = "{data["model"]}"` is {shape}',
                f'write a [model] table: [model] name = "{data["model"]}"',
                code="retired",
            )
        )
    if isinstance(data.get("env"), list):
        out.diagnostics.append(
            _diag(
                pos,
                ("env",),
                f"[[env]] is {shape}",
                'write [[orchestrator.train.source]] with [orchestrator.train.source.env.taskset] id = "<env id>"',
                code="retired",
            )
        )
    for key, home in HOSTED_KEYS.items():
        if key in data:
            out.diagnostics.append(
                _diag(pos, (key,), f"`{key}` belongs to {shape}", f"current home: {home}", code="retired")
            )
    return out
