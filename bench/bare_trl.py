"""The baseline for bench_engine.py: the same GRPO run as a primenb run, as a bare TRL script.

Same tiny model (built from config, seed 0), same reverse-text rows and reward, same GRPOConfig
arguments (read from the primenb run's configs/trainer_args.json); no primenb callbacks, status
files, samples or stop handling. Writes (time, step) of every TRL log call to OUT as JSON.

    python bench/bare_grpo.py RUN_DIR OUT
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(run_dir: str, out: str) -> None:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from primenb.engine.data import build_sources, rl_rows
    from primenb.engine.models import build_byte_tokenizer, build_tiny_model
    from primenb.engine.plan import build_plan

    plan = build_plan(json.loads((Path(run_dir) / "configs" / "resolved.json").read_text()))
    args = json.loads((Path(run_dir) / "configs" / "trainer_args.json").read_text())["args"]
    sources = build_sources(plan.sources)
    rows = rl_rows(sources, chat=False)
    env = sources[0].env
    times: list[tuple[float, int]] = []

    class Times(TrainerCallback):
        def on_log(self, a, state, control, logs=None, **kw):  # type: ignore[no-untyped-def]
            times.append((time.time(), state.global_step))

    args = {**args, "run_name": "bare", "reward_weights": env.reward_weights}
    trainer = GRPOTrainer(
        model=build_tiny_model(plan.model_name, seed=plan.seed),
        reward_funcs=list(env.reward_funcs),
        args=GRPOConfig(output_dir=str(Path(out).parent / "bare-trainer"), **args),
        train_dataset=Dataset.from_list(rows),
        processing_class=build_byte_tokenizer(),
        callbacks=[Times()],
    )
    trainer.train()
    Path(out).write_text(json.dumps(times))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
