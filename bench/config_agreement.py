"""How often primenb's config verdict agrees with prime-rl's own loader.

Runs every file of `tests/data/upstream/` (upstream's 67 configs and 416 mutations of them, with
the verdicts prime-rl-configs 0.4.0 + verifiers 0.4.0 gave) through the path of
`primenb validate --json --rl|--sft FILE`, and counts:

* false errors: upstream accepts, primenb reports an error;
* false passes: upstream rejects, primenb reports no error;
* path mismatches: both reject, but primenb's first error is not inside what upstream names.

`python bench/config_agreement.py [-v]` prints the counts (and with -v every disagreement).
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
"""
_TAGS = set(_UNION_MEMBERS.split())
_FLAG = re.compile(r"^--(\S+)$|^<root>$")


@dataclass
class Verdict:
    name: str
    mode: str
    upstream_ok: bool | None  # None: depends on an environment package upstream did not have
    upstream_paths: list[tuple[str | int, ...]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    @property
    def primenb_ok(self) -> bool:
        return not self.errors

    @property
    def kind(self) -> str:
        """agree | false-error | false-pass | path-mismatch"""
        if self.upstream_ok is None or self.upstream_ok:
            return "false-error" if self.errors else "agree"
        if not self.errors:
            return "false-pass"
        return "agree" if path_matches(self.errors[0]["path"], self.upstream_paths) else "path-mismatch"


def _split(flag: str) -> tuple[str | int, ...]:
    """`orchestrator.train.source[0].env.agent` -> ("orchestrator", "train", "source", 0, "env", "agent")."""
    parts: list[str | int] = []
    for piece in re.findall(r"\[(\d+)\]|([^.\[\]]+)", flag):
        idx, key = piece
        parts.append(int(idx) if idx else key.replace("-", "_"))
    return tuple(parts)


def upstream_paths(message: str, data: dict[str, Any]) -> list[tuple[str | int, ...]]:
    """The TOML paths an upstream error names, with union tags (`data.sft.name`) dropped."""
    out = []
    for line in message.splitlines():
        m = _FLAG.match(line.strip())
        if not m:
            continue
        out.append(_strip_tags(_split(m.group(1)) if m.group(1) else (), data))
    return out


def _has(cur: Any, part: Any) -> bool:
    if isinstance(cur, dict):
        return isinstance(part, str) and part in cur
    return isinstance(cur, list) and isinstance(part, int) and part < len(cur)


def _strip_tags(loc: tuple[str | int, ...], data: Any) -> tuple[str | int, ...]:
    """Keep the segments that exist in the data (plus a final missing/extra key); drop tag names."""
    path: list[str | int] = []
    cur = data
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


def path_matches(primenb_path: str, upstream: list[tuple[str | int, ...]]) -> bool:
    """primenb's error lies at or inside one of the places upstream names."""
    mine = _split(primenb_path) if primenb_path else ()
    return any(mine[: len(u)] == u for u in upstream)


def _check(path: Path, mode: str) -> list[dict[str, Any]]:
    from primenb.config import check

    report = check(path, mode=mode).report
    return [json.loads(json.dumps(d.__dict__)) for d in report.errors]


def verdicts() -> list[Verdict]:
    import tomllib

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
        out.append(Verdict(row["file"], mode, ok, errors=_check(file, mode)))
    for line in (DATA / "mutations" / "index.jsonl").read_text().splitlines():
        row = json.loads(line)
        file = DATA / "mutations" / f"{row['i']}.toml"
        data = tomllib.loads(file.read_text())
        v = Verdict(f"mutations/{row['i']}.toml", row["mode"], row["upstream_ok"], note=row["mutation"])
        v.upstream_paths = upstream_paths(row["upstream_error"], data)
        v.errors = _check(file, row["mode"])
        out.append(v)
    return out


def summary(vs: list[Verdict]) -> dict[str, Any]:
    configs = [v for v in vs if not v.name.startswith("mutations/")]
    muts = [v for v in vs if v.name.startswith("mutations/")]
    kinds = [v.kind for v in muts]
    rejected = [v for v in muts if v.upstream_ok is False and v.errors]
    return {
        "configs": len(configs),
        "config_false_errors": sum(v.kind == "false-error" for v in configs),
        "mutations": len(muts),
        "mutation_false_errors": kinds.count("false-error"),
        "mutation_false_passes": kinds.count("false-pass"),
        "mutation_path_mismatches": kinds.count("path-mismatch"),
        "mutation_verdict_agreement": sum((v.upstream_ok is not False) == v.primenb_ok for v in muts) / len(muts),
        "mutation_agreement_with_paths": kinds.count("agree") / len(muts),
        "path_agreement_on_rejected": (sum(v.kind == "agree" for v in rejected) / len(rejected) if rejected else 1.0),
    }


def main() -> None:
    vs = verdicts()
    if "-v" in sys.argv:
        for v in vs:
            if v.kind != "agree":
                first = v.errors[0] if v.errors else {}
                print(f"{v.kind:14} {v.name:60} {v.note}")
                if first:
                    print(f"{'':14} primenb: {first['path']}: {first['message']}")
                if v.upstream_paths:
                    print(f"{'':14} upstream: {v.upstream_paths}")
    for k, val in summary(vs).items():
        print(f"{k:32}: {val:.4f}" if isinstance(val, float) else f"{k:32}: {val}")


if __name__ == "__main__":
    main()
