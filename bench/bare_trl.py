"""The baseline for bench_engine.py and bench_gpu.py: a primenb run's training as a bare TRL script.

Same model (built from config, same seed), same rows and reward, same TRL arguments (read from
the primenb run's configs/trainer_args.json); no primenb callbacks, status files, samples or stop
handling. Writes [time, step, num_tokens] of every TRL log call, and the peak GPU memory, to OUT.

    python bench/bare_trl.py RUN_DIR OUT

With ``BENCH_BARE_MALLOC=engine`` it first applies the engine's glibc malloc settings
(primenb/engine/allocator.py), to compare the two with the same allocator.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def main(run_dir: str, out: str) -> None:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    from primenb.engine.data import build_sources, rl_rows, sft_dataset
    from primenb.engine.models import build_byte_tokenizer, build_tiny_model
    from primenb.engine.plan import build_plan

    plan = build_plan(json.loads((Path(run_dir) / "configs" / "resolved.json").read_text()))
    saved = json.loads((Path(run_dir) / "configs" / "trainer_args.json").read_text())
    args = {**saved["args"], "run_name": "bare"}
    times: list[tuple[float, int, float]] = []
    reward_s = [0.0]  # seconds inside the reward functions

    class Times(TrainerCallback):
        def on_log(self, a, state, control, logs=None, **kw):  # type: ignore[no-untyped-def]
            times.append((time.time(), state.global_step, float((logs or {}).get("num_tokens", 0))))

    model = build_tiny_model(plan.model_name, seed=plan.seed)
    common = {"model": model, "processing_class": build_byte_tokenizer(), "callbacks": [Times()]}
    if plan.lora is not None:
        from primenb.engine.train import lora_config

        common["peft_config"] = lora_config(plan.lora, model)
    output_dir = str(Path(out).parent / "bare-trainer")
    if saved["trainer"] == "GRPOTrainer":
        from trl import GRPOConfig, GRPOTrainer

        sources = build_sources(plan.sources)
        env = sources[0].env
        trainer = GRPOTrainer(
            reward_funcs=[_timed(f, reward_s) for f in env.reward_funcs],
            train_dataset=Dataset.from_list(rl_rows(sources, chat=False)),
            args=GRPOConfig(output_dir=output_dir, **{**args, "reward_weights": env.reward_weights}),
            **common,
        )
    else:
        from trl import SFTConfig, SFTTrainer

        dataset, _ = sft_dataset(plan, chat=False)
        trainer = SFTTrainer(train_dataset=dataset, args=SFTConfig(output_dir=output_dir, **args), **common)
    trainer.train()
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
    Path(out).write_text(json.dumps({"logs": times, "peak_gpu_bytes": peak, "reward_s": reward_s[0]}))


def _timed(func: Any, total: list[float]) -> Any:
    """``func`` adding its time to ``total[0]`` (named as ``func`` for TRL's metrics)."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - t0

    timed.__name__ = getattr(func, "__name__", "reward")
    return timed


if __name__ == "__main__":
    if os.environ.get("BENCH_BARE_MALLOC") == "engine":
        from primenb.engine.allocator import tune_malloc

        tune_malloc()
    main(sys.argv[1], sys.argv[2])
