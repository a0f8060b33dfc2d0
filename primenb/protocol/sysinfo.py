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

from primenb.protocol.hashing import safe_env_vars

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
ENV_PREFIXES = ("CUDA_", "HF_", "TRANSFORMERS_", "TORCH_", "ACCELERATE_", "NCCL_", "OMP_", "MKL_")
ENV_NAMES = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


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
    """Reproducibility-relevant environment variables; names with KEY/TOKEN/SECRET/PASSWORD never."""
    return safe_env_vars(os.environ if environ is None else environ, ENV_PREFIXES, ENV_NAMES)


__all__ = ["cpu_model", "deps", "env_vars", "git_info", "hardware", "package_version"]
