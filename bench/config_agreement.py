"""How often primenb's config verdict agrees with prime-rl's own loader.

Runs every file of `tests/data/upstream/` (upstream's 67 configs, and the mutations of
`mutations/` (416), `mutations-2/` (520, harder) and `mutations-3/` (520, hand edits), with the
verdicts prime-rl-configs 0.4.0 + verifiers 0.4.0 + tomli 2.5 gave) through the path of
`primenb validate --json --rl|--sft FILE`, and counts per row one of:

* agree: upstream accepts and primenb reports no error (warnings are fine); or upstream rejects,
  primenb reports an error, and primenb's first error lies at or inside a place upstream names
  ("first": the first its checks met, TOML, then the schema, then the rules, as upstream's stages
  go; primenb lists its problems in the order of the text, upstream those of its first failing
  stage only);
* false error: upstream accepts, primenb reports an error;
* false pass: upstream rejects, primenb reports no error;
* path mismatch: both reject, but primenb's first error is not inside what upstream names;
* depends (upstream's configs only): the corpus marks upstream's verdict as depending on an
  environment package it did not have (`accepted_as: null`); counted apart, with how many of
  them primenb reports an error for.

The scoring rules that read upstream's message (each a fact of how upstream prints a place):

1. upstream names no place (a TOML syntax error, "harness ... not found"): any error agrees;
2. its `--a.b[0].c` flags are TOML paths, kebab-case for snake_case keys;
3. union member names in them are no keys (`--data.sft.name`, `--deployment.single-node`), nor
   are pydantic's labels of the member that failed (`literal['policy']`, `function-after[...]`);
4. a quoted key that holds a dot or ends in a space is one key (both tools print it unquoted);
5. shared tables: upstream copies `[model]`, `[ckpt]`, `[slurm]`, ... into the sub-configs before
   validating, so `trainer.model.name` in its message is the file's `[model] name`, and primenb's
   error at a shared key is at every sub-config place upstream copies it into;
6. when upstream's list is cut short (it counts more errors than it prints), any of primenb's
   errors at a listed place agrees.

Also counted: first error paths that name a place neither in the file nor upstream's.
`python bench/config_agreement.py [-v] [mutations|mutations-2|mutations-3]` prints the counts
and a table by kind of change (the first word of each mutation) per set; -v every disagreement.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "upstream"
# union member names upstream's flags carry (`--data.sft.name`, `--deployment.single-node`)
_UNION_MEMBERS = """
single_node multi_node sft fake adamw sgd muon sign_sgd filesystem nccl nixl zmq grpo echo max_rl rae hierarchical_grpo
opd opsd prime subprocess docker podman apptainer modal e2b default ipo custom constant linear cosine
native mooncake disaggregated vllm_router llm_d standard difficulty_pool advantage_range fp8 mxfp8
"""
_TAGS = set(_UNION_MEMBERS.split())
_FLAG = re.compile(r"^--(.+)$|^<root>$")  # member names hold spaces: `function-after[f(), M]`


@dataclass
class Verdict:
    name: str
    mode: str
    upstream_ok: bool | None  # None: depends on an environment package upstream did not have
    upstream_paths: list[tuple[str | int, ...]] = field(default_factory=list)
    truncated: bool = False  # upstream's message lists fewer errors than it counts (cut short)
    errors: list[dict[str, Any]] = field(default_factory=list)  # as listed: in the text's order
    first: str = ""  # the path of the first error primenb's checks met
    note: str = ""
    absent: bool = False  # the first error names a place neither in the file nor upstream's
    data: dict[str, Any] = field(default_factory=dict)  # the file as upstream read it

    @property
    def primenb_ok(self) -> bool:
        return not self.errors

    @property
    def change(self) -> str:
        """The kind of mutation: `legacy`, `edge`, `multi`... (`config` for upstream's own files)."""
        return self.note.split()[0].split("[")[0] if self.note else "config"

    @property
    def kind(self) -> str:
        """agree | false-error | false-pass | path-mismatch | depends"""
        if self.upstream_ok is None:
            return "depends"  # upstream's verdict needs an environment package it did not have
        if self.upstream_ok:
            return "false-error" if self.errors else "agree"
        if not self.errors:
            return "false-pass"
        if not self.upstream_paths:
            return "agree"  # upstream names no place (a TOML syntax error, a message of its own)
        if path_matches(self.first, self.upstream_paths, self.data, self.mode):
            return "agree"
        # upstream's list was cut short: primenb's first may be one it did not print
        if self.truncated and any(
            path_matches(e["path"], self.upstream_paths, self.data, self.mode) for e in self.errors
        ):
            return "agree"
        return "path-mismatch"


# pydantic's label for the union member that failed (`literal['policy']`,
# `function-after[require-explicit-endpoint(), FrozenModelConfig]`): it names no key of the file
_MEMBER_LABEL = re.compile(r"\.?[a-z][a-z-]*\[(?!\d+\])[^\]]*\]")


def _split(flag: str) -> tuple[str | int, ...]:
    """`orchestrator.train.source[0].env.agent` -> ("orchestrator", "train", "source", 0, "env", "agent")."""
    parts: list[str | int] = []
    for piece in re.findall(r"\[(\d+)\]|([^.\[\]]+)", _MEMBER_LABEL.sub("", flag)):
        idx, key = piece
        parts.append(int(idx) if idx else key.replace("-", "_"))
    return tuple(parts)


_SUBCONFIGS = ("trainer", "orchestrator", "inference")
_COUNT = re.compile(r"(\d+) validation errors? for")


def upstream_paths(message: str, data: dict[str, Any]) -> list[tuple[str | int, ...]]:
    """The TOML paths an upstream error names, with union tags (`data.sft.name`) dropped.

    An RL config's shared tables (`[model]`, `[ckpt]`, `[slurm]`, `[monitors]`...) are copied into
    the sub-configs before upstream validates them, so it names `trainer.model.name` for a bad
    top-level `model.name`: the shared place the file holds counts as the same place."""
    out = []
    for line in message.splitlines():
        m = _FLAG.match(line.lstrip())  # not rstrip: a quoted key may end in a space (`"lr "`)
        if not m:
            continue
        loc = _split(m.group(1)) if m.group(1) else ()
        out.append(_strip_tags(loc, data))
        if len(loc) > 1 and loc[0] in _SUBCONFIGS and isinstance(data.get(loc[1]), dict):
            out.append(_strip_tags(loc[1:], data))
    return out


def truncated(message: str) -> bool:
    """Whether upstream's message names fewer places than the errors it counts."""
    m = _COUNT.search(message)
    flags = sum(bool(_FLAG.match(line.strip())) for line in message.splitlines())
    return bool(m) and flags < int(m.group(1))


def _has(cur: Any, part: Any) -> bool:
    if isinstance(cur, dict):
        return isinstance(part, str) and part in cur
    return isinstance(cur, list) and isinstance(part, int) and part < len(cur)


def _strip_tags(loc: tuple[str | int, ...], data: Any) -> tuple[str | int, ...]:
    """Keep the segments that exist in the data (plus a final missing/extra key); drop tag names."""
    path: list[str | int] = []
    cur = data
    loc = join_keys(loc, data)
    for i, part in enumerate(loc):
        if _has(cur, part):
            path.append(part)
            cur = cur[part]
        elif i == len(loc) - 1 and isinstance(cur, dict) and part in _TAGS:
            break  # a model validator of a union member: `--deployment.single-node`
        elif not isinstance(cur, (dict, list)):
            break  # past a leaf value: the rest names union members (`ep.int`)
        elif i == len(loc) - 1:
            path.append(part)
    return tuple(path)


def join_keys(loc: tuple[str | int, ...], data: Any) -> tuple[str | int, ...]:
    """Both tools print a quoted key that holds a dot (`"sampling.max_completion_tokens"`)
    unquoted: parts that together name one key of the file are that key."""
    out: list[str | int] = []
    cur = data
    i = 0
    while i < len(loc):
        part = loc[i]
        if isinstance(cur, dict) and isinstance(part, str) and part not in cur:
            for j in range(len(loc), i + 1, -1):
                joined = ".".join(str(p) for p in loc[i:j])
                if joined in cur:
                    part, i = joined, j - 1
                    break
        out.append(part)
        cur = cur[part] if _has(cur, part) else None
        i += 1
    return tuple(out)


def path_matches(primenb_path: str, upstream: list[tuple[str | int, ...]], data: Any = None, mode: str = "rl") -> bool:
    """primenb's error lies at or inside one of the places upstream names. A shared key the file
    writes (`[model] name`) is also the sub-config keys upstream copies it into before validating
    (`orchestrator.model.name`, prime-rl's propagate_shared_fields): upstream names those."""
    from primenb.config.propagate import fed_by

    mine = join_keys(_split(primenb_path), data) if primenb_path else ()
    places = [mine, *fed_by(mine, mode)] if mine else [mine]
    return any(p[: len(u)] == u for p in places for u in upstream)


def _check(path: Path, mode: str) -> tuple[list[dict[str, Any]], str]:
    """primenb's errors as `validate --json` lists them, and the path of the first it met."""
    from primenb.config import check

    report = check(path, mode=mode).report
    first = report.first_found_error
    return [json.loads(json.dumps(d.__dict__)) for d in report.errors], first.path if first else ""


SETS = ("mutations", "mutations-2", "mutations-3")


def path_in_file(path: str, data: dict[str, Any], upstream: list[tuple[str | int, ...]]) -> bool:
    """An error's path names a place in the file (its last key may be the missing one) or upstream's."""
    loc = join_keys(_split(path), data) if path else ()
    if any(loc == u for u in upstream):
        return True
    cur: Any = data
    for i, part in enumerate(loc):
        if not _has(cur, part):
            return i == len(loc) - 1
        cur = cur[part]
    return True


def mutation_verdicts(name: str) -> list[Verdict]:
    import tomli  # upstream's reader (TOML 1.1 from tomli 2.4; the verdicts were made with 2.5)

    out = []
    for line in (DATA / name / "index.jsonl").read_text().splitlines():
        row = json.loads(line)
        file = DATA / name / f"{row['i']}.toml"
        v = Verdict(f"{name}/{row['i']}.toml", row["mode"], row["upstream_ok"], note=row["mutation"])
        try:
            data = tomli.loads(file.read_text())
        except tomli.TOMLDecodeError:
            data = {}
        v.data = data
        v.upstream_paths = upstream_paths(row["upstream_error"], data)
        v.truncated = truncated(row["upstream_error"])
        v.errors, v.first = _check(file, row["mode"])
        v.absent = bool(v.errors) and bool(data) and not path_in_file(v.first, data, v.upstream_paths)
        out.append(v)
    return out


def config_verdicts() -> list[Verdict]:
    out = []
    for line in (DATA / "configs.jsonl").read_text().splitlines():
        row = json.loads(line)
        file = DATA / "configs" / row["file"]
        accepted = row["accepted_as"]
        if accepted is None:
            mode = "sft" if file.name.startswith("sft") else "rl"
            ok: bool | None = None
        elif "RLConfig" in accepted or "SFTConfig" in accepted:
            mode, ok = ("rl" if "RLConfig" in accepted else "sft"), True
        else:
            continue  # a trainer/orchestrator/inference/evals config: not primenb's to validate
        errors, first = _check(file, mode)
        out.append(Verdict(row["file"], mode, ok, errors=errors, first=first))
    return out


def verdicts(sets: tuple[str, ...] = ("mutations",)) -> list[Verdict]:
    """Upstream's configs, then the mutations of each named set."""
    out = config_verdicts()
    for name in sets:
        out += mutation_verdicts(name)
    return out


def summary(vs: list[Verdict]) -> dict[str, Any]:
    configs = [v for v in vs if v.change == "config"]
    muts = [v for v in vs if v.change != "config"]
    kinds = [v.kind for v in muts]
    rejected = [v for v in muts if v.upstream_ok is False and v.errors]
    return {
        "configs": len(configs),
        "config_false_errors": sum(v.kind == "false-error" for v in configs),
        "configs_depending_on_env_packages": sum(v.kind == "depends" for v in configs),
        "of_them_with_a_primenb_error": sum(v.kind == "depends" and bool(v.errors) for v in configs),
        "mutations": len(muts),
        "mutation_false_errors": kinds.count("false-error"),
        "mutation_false_passes": kinds.count("false-pass"),
        "mutation_path_mismatches": kinds.count("path-mismatch"),
        "mutation_verdict_agreement": sum(v.upstream_ok == v.primenb_ok for v in muts) / len(muts),
        "mutation_agreement_with_paths": kinds.count("agree") / len(muts),
        "path_agreement_on_rejected": (sum(v.kind == "agree" for v in rejected) / len(rejected) if rejected else 1.0),
        "first_paths_absent_from_file": sum(v.absent for v in muts),
    }


def by_kind(vs: list[Verdict]) -> dict[str, tuple[int, int]]:
    """kind of change -> (agreeing, total), agreement counting the first error's path."""
    table: dict[str, tuple[int, int]] = {}
    for v in vs:
        if v.change == "config":
            continue
        ok, n = table.get(v.change, (0, 0))
        table[v.change] = (ok + (v.kind == "agree"), n + 1)
    return dict(sorted(table.items()))


def main() -> None:
    sets = tuple(a for a in sys.argv[1:] if a in SETS) or SETS
    vs = config_verdicts()
    for name in sets:
        vs += mutation_verdicts(name)
        print(f"{name}: kind, agreement (first error path included)")
        for change, (ok, n) in by_kind([v for v in vs if v.name.startswith(name + "/")]).items():
            print(f"  {change:10} {ok:4}/{n:<4} {ok / n:7.1%}")
        for k, val in summary([v for v in vs if v.name.startswith(name + "/") or v.change == "config"]).items():
            print(f"  {k:32}: {val:.4f}" if isinstance(val, float) else f"  {k:32}: {val}")
    if "-v" in sys.argv:
        for v in vs:
            if (v.kind == "agree" and not v.absent) or (v.kind == "depends" and not v.errors):
                continue
            first = next((e for e in v.errors if e["path"] == v.first), {})
            print(f"{v.kind if v.kind != 'agree' else 'absent-path':14} {v.name:60} {v.note}")
            if first:
                print(f"{'':14} primenb: {first['path']}: {first['message']}")
            if v.upstream_paths:
                print(f"{'':14} upstream: {v.upstream_paths}")


if __name__ == "__main__":
    main()
