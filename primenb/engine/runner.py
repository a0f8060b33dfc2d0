"""The engine process: read the run directory, train, and always leave a final status.

``python -m primenb.engine RUN_DIR`` (one process per rank under torchrun/accelerate). Only rank 0
writes files. Exit code: 0 completed or stopped, 1 failed, 130 aborted by a second signal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from primenb.engine import ranks
from primenb.protocol.privacy import LogFilter, error_text, run_denies, set_private
from primenb.protocol.rundir import DONE, IMPORTING, STARTING, RunDir, State, tail_lines

log = logging.getLogger("primenb.engine")
LOG_FORMAT = "%(asctime)s %(levelname)s [%(name)s] %(message)s"


def setup_logging(run_dir: RunDir, *, is_main: bool, rank: int) -> None:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for h in list(root.handlers):
        root.removeHandler(h)
    fmt = logging.Formatter(LOG_FORMAT if rank == 0 else f"[rank {rank}] {LOG_FORMAT}")
    scrub = LogFilter()  # secrets always; exception messages too under data_collection = "deny"
    stream = logging.StreamHandler(sys.stderr)  # stderr is logs/launcher.log
    stream.setFormatter(fmt)
    stream.addFilter(scrub)
    root.addHandler(stream)
    if is_main:
        run_dir.log_path.parent.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(run_dir.log_path, encoding="utf-8")
        fh.setFormatter(fmt)
        fh.addFilter(scrub)
        root.addHandler(fh)
    logging.captureWarnings(True)
    # raised from inside TRL on every run; nothing a user can act on
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def _route_library_logs() -> None:
    """transformers/TRL log through the root handlers (file + stderr) at WARNING and above."""
    import transformers

    tl = transformers.utils.logging
    tl.set_verbosity_warning()
    tl.disable_default_handler()
    tl.enable_propagation()
    tl.disable_progress_bar()
    try:
        import datasets
        import huggingface_hub

        datasets.disable_progress_bars()
        huggingface_hub.utils.disable_progress_bars()
    except Exception:  # pragma: no cover - cosmetic only
        pass


def _flush_logs() -> None:
    for h in logging.getLogger().handlers:
        h.flush()


def _error_text(exc: BaseException) -> str:
    from primenb.errors import PrimenbError

    if isinstance(exc, PrimenbError):  # primenb's own messages: no user data in them
        return str(exc)
    return error_text(exc)  # redacted; the type only under data_collection = "deny"


def main(argv: list[str] | None = None) -> int:
    """The engine process; its stdout and stderr (logs/launcher.log) pass the secret rule, since
    libraries print there without the engine's log filter (MLflow's run URL with its password)."""
    from primenb.protocol.privacy import RedactingStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        return _main(argv)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m primenb.engine RUN_DIR", file=sys.stderr)
        return 2
    run_dir = RunDir(Path(args[0]).expanduser().resolve())
    if not run_dir.resolved_config.exists():
        print(f"error: {run_dir.resolved_config} does not exist", file=sys.stderr)
        return 2
    set_private(run_denies(run_dir))  # before anything can log or fail

    from primenb.engine.allocator import tune_malloc
    from primenb.engine.trace import TraceRecorder, enable_determinism, prepare_determinism

    malloc = tune_malloc()  # before torch allocates anything
    prepare_determinism()  # before torch is imported
    rank = ranks.rank()
    is_main = rank == 0
    world = ranks.world_size()
    if world == 1 and "CUDA_VISIBLE_DEVICES" not in os.environ:
        # one process trains on one GPU (TRL refuses nn.DataParallel); more GPUs need N ranks
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    setup_logging(run_dir, is_main=is_main, rank=rank)
    if isinstance(malloc, str):
        log.info("malloc: glibc defaults (%s)", malloc)
    else:
        mb = {k: v >> 20 for k, v in malloc.items()}
        log.info(
            "malloc: blocks up to %d MB stay in the heap, trimmed over %d MB free",
            mb["mmap_threshold"],
            mb["trim_threshold"],
        )
    from primenb.engine.status import EngineStatus

    status = EngineStatus(run_dir, enabled=is_main)

    from primenb.engine.plan import build_plan
    from primenb.engine.stop import StopFlag

    status.start(world_size=world, rank=rank, phase=STARTING)
    trace = TraceRecorder(run_dir, enabled=is_main)
    stop = StopFlag(run_dir)
    stop.on_request = lambda reason: status.update(stop_requested=reason)
    stop.install()
    t0 = time.time()
    ctx = None
    ending = State.FAILED  # how the trackers are told the run ended, if the finally closes them
    try:
        cfg = run_dir.read_config()
        trace.begin(cfg, status.data)
        if is_main and trace.trace_id:  # the record trust is read from (outside the run directory)
            from primenb.protocol.provenance import record_engine_run

            record_engine_run(run_dir.root, trace.trace_id)
        plan = build_plan(cfg)
        trace.set_plan(plan)
        status.update(mode=plan.mode, max_steps=plan.max_steps, model=plan.model_name, trace_id=trace.trace_id)
        if plan.rollouts is not None:  # what a GRPO step costs next to a warm-up step (the monitor's ETA)
            tokens = plan.rollouts.max_completion_tokens or plan.seq_len
            status.update(step_plan={"rollouts": plan.rollouts.batch_size, "max_tokens": int(tokens)})
        log.info(
            "engine start: %s run, model %s, %d steps, %d rank(s), pid %d",
            plan.mode,
            plan.model_name,
            plan.max_steps,
            world,
            os.getpid(),
        )

        from primenb.engine.hub import go_offline_if_unreachable

        if go_offline_if_unreachable(plan):
            log.warning("the Hugging Face hub is not reachable: using the local cache only")

        status.update(phase=IMPORTING)  # before torch loads: that import is most of a cold start
        from primenb.engine.callbacks import EngineContext  # first torch import

        ctx = EngineContext(run_dir=run_dir, plan=plan, status=status, stop=stop, is_main=is_main, trace=trace)
        trace.determinism = enable_determinism()
        _route_library_logs()
        from primenb.engine.train import run_training

        ctx.open_writers()
        if is_main:
            from primenb.engine.reporting import open_trackers

            ctx.trackers = open_trackers(plan, cfg, run_dir, trace.trace_id, status)
        result = run_training(plan, ctx)
        state = State.STOPPED if result.stopped else State.COMPLETED
        _close_trackers(ctx, trace, state)  # before the final state: a tracker's closing warning is shown with it
        status.finish(
            state,
            step=result.step,
            final_checkpoint=result.final_checkpoint,
            eval_first=result.first_eval or None,
            eval_last=result.last_eval or None,
            wall_s=round(time.time() - t0, 2),
            phase=DONE,
        )
        log.info("engine %s at step %d in %.1f s", state, result.step, time.time() - t0)
        return 0
    except KeyboardInterrupt as exc:
        ending = State.STOPPED
        log.warning("aborted: %s", error_text(exc) if str(exc) else "interrupted")
        _flush_logs()
        status.finish(
            State.STOPPED,
            error=f"aborted: {error_text(exc) if str(exc) else 'interrupted'}",
            log_tail=tail_lines(run_dir.log_path),
            wall_s=round(time.time() - t0, 2),
        )
        return 130
    except BaseException as exc:  # any failure: leave a readable status behind
        from primenb.errors import PrimenbError

        if isinstance(exc, PrimenbError):
            log.error("%s", _error_text(exc))
        else:
            log.exception("engine failed: %s", _error_text(exc))
        _flush_logs()
        status.finish(
            State.FAILED,
            error=_error_text(exc),
            error_type=type(exc).__name__,
            log_tail=tail_lines(run_dir.log_path),
            wall_s=round(time.time() - t0, 2),
        )
        return 1
    finally:
        if ctx is not None:
            ctx.close()
            _close_trackers(ctx, trace, ending)  # a failed or stopped run's trackers (a no-op once closed)
        trace.finish(status.data)  # completed, failed or stopped: the trace says which
        _shutdown_dist()
        _flush_logs()


def _close_trackers(ctx: Any, trace: Any, state: str) -> None:
    """Close the trackers once, telling them how the run ended; where each tracker run lives (and
    why a tracker is off) goes into the trace."""
    if ctx.trackers is not None:
        fan, ctx.trackers = ctx.trackers, None
        trace.doc["trackers"] = fan.finish(ctx.last_eval, str(state))


def _shutdown_dist() -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    except Exception:  # pragma: no cover - best effort at exit
        pass


__all__ = ["main", "setup_logging"]
