"""`make demo`: the main job on the embedded default, headless.

Writes the starter rl.toml (tiny byte-level model, reverse-text, SFT warm start then GRPO),
trains it through the local backend exactly as `%prime_train` does, prints progress, then the
held-out greedy reward at the start (random init), after the SFT warm start, and at the end.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from primenb.backends import submit
from primenb.config import load_config
from primenb.config.templates import starter
from primenb.fsutil import atomic_write_text
from primenb.protocol import metrics as M
from primenb.render.progress import follow
from primenb.run import Run


def _eval_line(row: dict, *, warm: bool = False) -> str:
    def first(metric: str) -> Any:
        key = M.first_present(metric, row, warm=warm)
        return row[key] if key else None

    reward, exact, n = first(M.EVAL_REWARD), first(M.EVAL_EXACT_MATCH), first(M.EVAL_EXAMPLES)
    if reward is None:
        return "(not measured)"
    return f"mean reward {reward:.3f}, exact match {exact:.2f} on {n} held-out prompts"


def report(run: Run) -> None:
    rows = run.metric_rows()
    warm = [r for r in rows if M.eval_keys(r, warm=True)]
    evals = [r for r in rows if M.eval_keys(r)]
    print("\nheld-out greedy evaluation (reverse-text):")
    if warm:
        print(f"  start (random init)   : {_eval_line(warm[0], warm=True)}")
    if evals:
        print(f"  after SFT warm start  : {_eval_line(evals[0])}")
        print(f"  end (after GRPO)      : {_eval_line(evals[-1])}")
    status = run.status
    print(f"  {status.get('step')} GRPO steps, {status.get('wall_s')} s in the engine; run directory {run.dir}")


def main() -> int:
    out = Path("outputs/demo")
    config_path = atomic_write_text(out / "rl.toml", starter())
    config = load_config(config_path)
    print(repr(config), "\n")
    run = submit(config, name=f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    print(f"training {run.name} ... (stop with Ctrl-C: a final checkpoint is kept)")
    code = follow(run, every=5.0)
    report(run)
    return code


if __name__ == "__main__":
    sys.exit(main())
