"""`make demo`: the main job on the embedded default.

Writes the starter configs, validates them and the upstream examples, and prints their summaries.
"""

from __future__ import annotations

import sys
from pathlib import Path

from primenb.config import check, load_config
from primenb.config.templates import starter
from primenb.fsutil import atomic_write_text

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    out = Path("outputs/demo")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("rl.toml", starter()), ("sft.toml", starter(sft=True))):
        atomic_write_text(out / name, text)
        print(repr(load_config(out / name)), "\n")
    failed = 0
    for path in sorted((ROOT / "examples" / "upstream").rglob("*.toml")):
        report = check(path).report
        failed += not report.ok
        print(f"{path.relative_to(ROOT)}: {'ok' if report.ok else report.to_text()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
