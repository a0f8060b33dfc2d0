"""What a trace records about the machine: dependency versions, hardware, git state, env vars.

No torch import here: GPU details and torch's CUDA version are read from an already imported
torch (the engine passes it in), so the notebook side stays light.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "numpy",
    "primenb",
    "verifiers",
)
# The only environment variables a trace records (traces are exported and shared): an explicit
# list of names that select devices, threads, determinism and offline modes. A name that is not
# here is never recorded, whatever it is called: `HF_TOKEN_WRITE`, `CUDA_SECRETS` or `HF_KEY` hold
# credentials no pattern foresees, so the list names what is harmless instead of what is secret.
SAFE_ENV_NAMES = frozenset(
    {
        # device selection
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "CUDA_LAUNCH_BLOCKING",
        "CUDA_MODULE_LOADING",
        "NVIDIA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        # determinism and numerics
        "PYTHONHASHSEED",
        "CUBLAS_WORKSPACE_CONFIG",
        "PYTORCH_CUDA_ALLOC_CONF",
        "TORCH_USE_CUDA_DSA",
        "NVIDIA_TF32_OVERRIDE",
        # thread counts
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "TOKENIZERS_PARALLELISM",
        # process layout
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "ACCELERATE_MIXED_PRECISION",
        "ACCELERATE_USE_CPU",
        "NCCL_DEBUG",
        "NCCL_P2P_DISABLE",
        "NCCL_IB_DISABLE",
        # offline modes and hub behaviour
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "HF_HUB_ENABLE_HF_TRANSFER",
        "HF_HUB_DISABLE_PROGRESS_BARS",
    }
)
# a harmless variable holds a short setting ("0,1", "1", "max_split_size_mb:128")
_VALUE_MAX = 200


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def primenb_version() -> str:
    """primenb's own version, from the installed metadata (pyproject.toml is the one place it is
    written); a source tree that was never installed says so."""
    return package_version("primenb") or "0+unknown"


def deps(torch: Any = None) -> dict[str, Any]:
    """Python and package versions (absent packages are left out), torch's CUDA/cuDNN builds."""
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }
    for name in PACKAGES:
        version = package_version(name)
        if version is not None:
            out[name] = version
    if torch is not None:
        out["torch"] = str(torch.__version__)
        out["torch_cuda"] = getattr(torch.version, "cuda", None)
        try:
            cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        except Exception:  # pragma: no cover - exotic builds
            cudnn = None
        out["cudnn"] = cudnn
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def hardware(torch: Any = None) -> dict[str, Any]:
    """CPU model and counts, memory, GPU names and count (from torch when it is loaded)."""
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    out: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "memory_gb": _memory_gb(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "gpu_count": 0,
        "gpus": [],
    }
    if torch is not None:
        out["torch_threads"] = torch.get_num_threads()
        try:
            if torch.cuda.is_available():
                n = torch.cuda.device_count()
                out["gpu_count"] = n
                out["gpus"] = [torch.cuda.get_device_name(i) for i in range(n)]
        except Exception:  # pragma: no cover - a broken driver must not break a trace
            pass
    return out


def git_info(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """``{"commit", "dirty", "branch", "root"}`` of the git work tree around ``cwd``; None when it
    is not one (or git is missing). Dirty = tracked files differ from the commit."""
    where = str(cwd or os.getcwd())

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "-C", where, *args], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    root = git("rev-parse", "--show-toplevel")
    if not root:
        return None
    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "root": root,
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
    }


def env_vars(environ: Any = None) -> dict[str, str]:
    """The environment variables on `SAFE_ENV_NAMES` that are set, sorted by name; nothing else.
    A value is kept only as a short plain string (and still passes through secret redaction)."""
    from primenb.protocol.hashing import redact_text

    source = os.environ if environ is None else environ
    out = {}
    for name in sorted(SAFE_ENV_NAMES):
        value = source.get(name)
        if isinstance(value, str) and len(value) <= _VALUE_MAX and value.isprintable():
            out[name] = redact_text(value)
    return out


__all__ = [
    "SAFE_ENV_NAMES",
    "cpu_model",
    "deps",
    "env_vars",
    "git_info",
    "hardware",
    "package_version",
    "primenb_version",
]
