"""The engine's side of the harness: ``RUN_DIR/trace.json``, written at start, completed at the end.

`TraceRecorder.begin` writes what is known before training (identity, lineage, the redacted
resolved config, dependency versions, hardware, git state, privacy settings); the trainer builders
report the model (architecture fingerprint, full fine-tune or adapter) and the data (hashes of the
examples the trainer and the evaluator get); `finish` completes it with the final state, times,
steps, metrics summary, seeds, checkpoints and, for a rerun, whether the metrics matched the
original step for step. Every write is atomic and is mirrored into the harness index (best
effort: an index problem never fails a run). Only rank 0 records.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from primenb.protocol.fields import DEFAULT_BACKEND
from primenb.protocol.hashing import combine, redact, rows_hash
from primenb.protocol.record import (
    TRACE_VERSION,
    compare_metrics,
    complete_from_run_dir,
    new_trace_id,
    read_trace,
    write_trace,
)
from primenb.protocol.rundir import RunDir, State, now_iso, read_jsonl

log = logging.getLogger("primenb.engine")
CUBLAS_WORKSPACE = ":4096:8"
_HASH_ALL_ROWS_UP_TO = 200_000


def prepare_determinism() -> None:
    """Before torch is imported: deterministic cuBLAS needs this in the environment, and OpenMP's
    thread pool must not size itself by the machine's load (libgomp's "dynamic" mode, off by
    default, picks fewer threads when the load average is high, which splits reductions
    differently and changes the low bits of every step). MKL's own "dynamic" mode stays on: it
    picks threads by problem size only, and turning it off made every small GEMM a two-thread
    barrier, 5x slower per step on an oversubscribed machine (bench_engine, load 14 on 2 CPUs)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    os.environ.setdefault("OMP_DYNAMIC", "FALSE")


def enable_determinism() -> dict[str, Any]:
    """Deterministic algorithms where torch has them (warn, not fail, where it has none)."""
    import torch

    torch.use_deterministic_algorithms(True, warn_only=True)
    # filling every new tensor with NaN (on by default with the flag above) catches reads of
    # uninitialized memory but costs ~2x CPU time on the tiny models; results do not depend on it
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    return {
        "deterministic_algorithms": True,
        "warn_only": True,
        "fill_uninitialized_memory": False,
        "cudnn_deterministic": True,
        "cudnn_benchmark": False,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "omp_dynamic": os.environ.get("OMP_DYNAMIC"),
        "cpu_threads": torch.get_num_threads(),
    }


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A trace problem is logged, never allowed to fail the run."""

    def wrapper(self: TraceRecorder, *args: Any, **kwargs: Any) -> Any:
        if not self.enabled:
            return None
        try:
            return fn(self, *args, **kwargs)
        except Exception as exc:
            log.warning("trace: %s failed (%s: %s)", fn.__name__, type(exc).__name__, exc, exc_info=True)
            return None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _prompt_format(env: Any) -> dict[str, str]:
    """The environment's text prompt format, kept as data: what serving an imported (untrusted)
    trace uses instead of building its environment (`primenb.traces.trust.prompt_format`)."""
    template = getattr(env, "text_template", None)
    return {"text_template": template} if isinstance(template, str) and len(template) <= 10_000 else {}


def env_version(env_id: str, env: Any) -> str | None:
    """The environment's own ``version``, else the version of the package that provides it."""
    own = getattr(env, "version", None)
    if own:
        return str(own)
    from primenb.protocol.sysinfo import package_version

    module = env_id.partition(":")[0] if ":" in env_id else type(env).__module__
    top = module.split(".")[0]
    if top == "primenb":
        return f"primenb {package_version('primenb')}"
    try:
        from importlib.metadata import packages_distributions

        dists = packages_distributions().get(top) or [top]
    except Exception:  # pragma: no cover - broken metadata
        dists = [top]
    version = package_version(dists[0])
    if version:
        return f"{dists[0]} {version}"
    mod = sys.modules.get(module) or sys.modules.get(top)
    own_version = getattr(mod, "__version__", None)
    return f"{top} {own_version}" if own_version else None


def trace_of_checkpoint(path: str | None) -> str | None:
    """The trace id of the run a checkpoint (or a run directory / its checkpoints folder) is from."""
    if not path:
        return None
    p = Path(path).expanduser()
    for cand in (p, p.parent, p.parent.parent):
        doc = read_trace(cand)
        if doc is not None:
            return str(doc["trace_id"])
    return None


class TraceRecorder:
    def __init__(self, run_dir: RunDir, *, enabled: bool = True) -> None:
        self.run_dir = run_dir
        self.enabled = enabled
        self.doc: dict[str, Any] = (read_trace(run_dir.root) or {}) if enabled else {}
        self.plan: Any = None
        self.determinism: dict[str, Any] | None = None

    @property
    def trace_id(self) -> str | None:
        return self.doc.get("trace_id")

    def _write(self) -> None:
        from primenb.protocol.index import index_trace

        write_trace(self.run_dir.root, self.doc)
        index_trace(self.doc, self.run_dir.root)

    # -- start ------------------------------------------------------------------------------
    @_guarded
    def begin(self, cfg: dict[str, Any] | None, status: dict[str, Any]) -> None:
        """Identity, lineage, config, deps, hardware, git: written before any heavy import."""
        from primenb.protocol.fields import detect_mode
        from primenb.protocol.sysinfo import deps, env_vars, git_info, hardware

        doc = self.doc
        cfg = cfg or {}
        privacy = ((cfg.get("primenb") or {}).get("privacy") or {}) if isinstance(cfg, dict) else {}
        record_host = privacy.get("record_hostname", True) is not False
        record_git = privacy.get("record_git", True) is not False
        mode: str | None
        try:
            mode = detect_mode(cfg)
        except Exception:
            mode = status.get("mode")
        doc.setdefault("trace_id", new_trace_id())
        doc.setdefault("parent", None)
        doc.setdefault("reproduces", None)
        doc.setdefault("created_at", status.get("queued_at") or now_iso())
        doc.setdefault("created", time.time())
        doc.update(
            trace_version=TRACE_VERSION,
            name=doc.get("name") or status.get("name") or self.run_dir.root.name,
            run_dir=str(self.run_dir.root),
            backend=doc.get("backend") or status.get("backend") or DEFAULT_BACKEND,
            host=status.get("host") if record_host else None,
            mode=mode,
            status=State.RUNNING,
            started_at=status.get("started_at") or now_iso(),
            finished_at=None,
            duration_s=None,
            pid=os.getpid(),
            config=redact(cfg),
            privacy={
                "data_collection": privacy.get("data_collection", "allow"),
                "record_hostname": record_host,
                "record_git": record_git,
            },
            deps=deps(),
            hardware=hardware(),
            git=git_info(os.getcwd()) if record_git else None,
            env_vars=env_vars(),
            cwd=os.getcwd(),
        )
        init_from = (cfg.get("primenb") or {}).get("init_from") if isinstance(cfg, dict) else None
        if init_from:
            doc["init_from"] = {"path": str(init_from), "trace": trace_of_checkpoint(str(init_from))}
            doc["parent"] = doc.get("parent") or doc["init_from"]["trace"]
        self._write()

    @_guarded
    def set_plan(self, plan: Any) -> None:
        from primenb.engine.models_info import is_tiny

        self.plan = plan
        self.doc["mode"] = plan.mode
        self.doc["steps"] = {"start": plan.start_step, "last": None, "max": plan.max_steps}
        self.doc["model"] = {
            "id": plan.model_name,
            "embedded": is_tiny(plan.model_name),
            "init_from": plan.init_from,
        }
        self.doc["finetune"] = "lora" if plan.lora else "full"
        if plan.lora:
            self.doc["adapter"] = {
                "type": "lora",
                "rank": plan.lora["r"],
                "alpha": plan.lora["lora_alpha"],
                "dropout": plan.lora["lora_dropout"],
                "target_modules": plan.lora["target_modules"],
                "modules_to_save": plan.lora["modules_to_save"],
            }
        else:
            self.doc["adapter"] = None
        self._write()

    # -- reported by the trainer builders ---------------------------------------------------
    @_guarded
    def record_model(self, model: Any, peft_config: Any, base: dict[str, Any]) -> None:
        """Architecture fingerprint of the model about to train, and the adapter it trains."""
        from primenb.engine.fingerprint import fingerprint

        info = self.doc.setdefault("model", {})
        info.update(fingerprint(model))
        info["base"] = base
        adapter = None
        peft = peft_config
        if peft is None and hasattr(model, "peft_config"):  # an adapter loaded by init_from
            peft = next(iter(model.peft_config.values()), None)
        if peft is not None:
            targets = peft.target_modules
            adapter = {
                "type": "lora",
                "rank": int(peft.r),
                "alpha": float(peft.lora_alpha),
                "dropout": float(peft.lora_dropout),
                "target_modules": sorted(targets) if isinstance(targets, (set, list)) else targets,
                "modules_to_save": sorted(peft.modules_to_save or []),
                "from_checkpoint": peft_config is None,
            }
        self.doc["adapter"] = adapter
        self.doc["finetune"] = "lora" if adapter else "full"

    @_guarded
    def record_data(self, kind: str, specs: list[Any], sources: list[Any], limit: int | None = None) -> None:
        """Hash the rows each source hands the trainer (``kind="train"``, ``"sft_warmup"``) or the
        evaluator (``"eval"``, the first ``limit`` rows)."""
        parts = []
        for spec, src in zip(specs, sources, strict=True):
            rows = src.env.eval_rows() if kind == "eval" else src.env.train_rows()
            if kind == "eval" and limit is not None and limit >= 0:
                rows = rows[:limit]
            digest, n = rows_hash(rows)
            parts.append(
                {
                    "name": src.name,
                    "env_id": spec.env_id,
                    "args": redact(dict(getattr(src.env, "args", None) or spec.env_args)),
                    "version": env_version(spec.env_id, src.env),
                    "hash": digest,
                    "examples": n,
                    **_prompt_format(src.env),
                }
            )
        self._set_data(kind, parts)

    @_guarded
    def record_sft_data(self, name: str, dataset: Any, env: Any, env_args: dict[str, Any]) -> None:
        """SFT: the environment's rows, or the hub dataset's rows, the trainer gets."""
        if env is not None:
            digest, n = rows_hash(env.train_rows())
            part = {
                "name": name,
                "env_id": name,
                "args": redact(dict(getattr(env, "args", None) or env_args)),
                "version": env_version(name, env),
                "hash": digest,
                "examples": n,
                **_prompt_format(env),
            }
        else:
            n = len(dataset)
            part = {
                "name": name,
                "dataset": name,
                "examples": n,
                "datasets_fingerprint": getattr(dataset, "_fingerprint", None),
            }
            if n <= _HASH_ALL_ROWS_UP_TO:
                part["hash"] = rows_hash(dict(row) for row in dataset)[0]
            else:
                part["hash"] = f"datasets:{part['datasets_fingerprint']}"
        self._set_data("train", [part])

    def _set_data(self, kind: str, parts: list[dict[str, Any]]) -> None:
        data = self.doc.setdefault("data", {})
        data[kind] = {
            "hash": combine((p["name"], str(p.get("hash"))) for p in parts),
            "examples": sum(int(p.get("examples") or 0) for p in parts),
            "sources": parts,
        }

    # -- end --------------------------------------------------------------------------------
    @_guarded
    def finish(self, status: dict[str, Any]) -> None:
        """Complete the trace from the run directory and the final status (any final state)."""
        from primenb.protocol.sysinfo import deps, hardware

        if "started_at" not in self.doc:  # the config could not even be read
            self.begin(None, status)
        torch = sys.modules.get("torch")
        doc = self.doc
        complete_from_run_dir(doc, self.run_dir.root, status)
        doc["deps"] = deps(torch)
        doc["hardware"] = hardware(torch)
        doc["determinism"] = self.determinism
        args = self._trainer_args()
        doc["trainer_args"] = redact(args) if args else None
        doc["seeds"] = self._seeds(args)
        if doc.get("reproduces"):
            doc["reproduction"] = self._reproduction()
        doc.pop("pid", None)
        self._write()

    def _trainer_args(self) -> dict[str, Any]:
        from primenb.protocol.reader import read_json_object

        try:
            data = read_json_object(self.run_dir.config_file("trainer_args.json"))
            return dict(data.get("args") or {})
        except (OSError, ValueError, TypeError):
            return {}

    def _seeds(self, args: dict[str, Any]) -> dict[str, Any]:
        plan = self.plan
        seed = args.get("seed", getattr(plan, "seed", None))
        envs = {}
        for kind in ("train", "eval"):
            for part in (self.doc.get("data") or {}).get(kind, {}).get("sources", []):
                if isinstance(part.get("args"), dict) and "seed" in part["args"]:
                    envs[f"{kind}:{part['name']}"] = part["args"]["seed"]
        tiny_init = bool(plan and (self.doc.get("model") or {}).get("embedded") and not plan.init_from)
        return {
            "python": seed,  # transformers.set_seed(seed): random, numpy, torch (+ CUDA)
            "numpy": seed,
            "torch": seed,
            "data_order": args.get("data_seed", seed),  # the trainer's sampler
            "sampling": seed,  # generation draws from torch's RNG, seeded above
            "model_init": getattr(plan, "seed", None) if tiny_init else None,
            "sft_warmup": getattr(plan, "seed", None) if getattr(plan, "sft_warmup_steps", 0) else None,
            "environments": envs,
            "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED"),
        }

    def _reproduction(self) -> dict[str, Any]:
        """Compare this run's metrics with those of the run it reproduces, step for step."""
        original_id = self.doc["reproduces"]
        original_dir = self.doc.get("reproduces_run_dir")
        original = read_trace(original_dir) if original_dir else None
        if original is None or original_dir is None or original.get("trace_id") != original_id:
            return {
                "of": original_id,
                "metrics_match": None,
                "note": f"the original run directory ({original_dir}) is not readable",
            }
        mine = list(read_jsonl(self.run_dir.metrics_path))
        theirs = list(read_jsonl(RunDir(original_dir).metrics_path))
        result: dict[str, Any] = {"of": original_id, **compare_metrics(theirs, mine)}
        result["data_match"] = (self.doc.get("data") or {}).get("train", {}).get("hash") == (
            original.get("data") or {}
        ).get("train", {}).get("hash")
        result["fingerprint_match"] = (self.doc.get("model") or {}).get("fingerprint") == (
            original.get("model") or {}
        ).get("fingerprint")
        result["same_hardware"] = (self.doc.get("hardware") or {}).get("cpu_model") == (
            original.get("hardware") or {}
        ).get("cpu_model")
        return result


__all__ = ["TraceRecorder", "enable_determinism", "env_version", "prepare_determinism", "trace_of_checkpoint"]
