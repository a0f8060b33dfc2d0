"""The training engine: what runs inside the training process.

Importing this package is cheap (no torch): the heavy code lives in submodules
(`primenb.engine.train`, `.models`, `.callbacks`, ...) that only the training process imports.

Entry point: ``python -m primenb.engine RUN_DIR``; `launch_command` builds that command line
(or its torchrun/accelerate form for several ranks). The run directory protocol is described
in `primenb.protocol.rundir`.
"""

from __future__ import annotations

from primenb.engine.launch import ENGINE_MODULE, launch_command
from primenb.engine.models_info import DEFAULT_MODEL, TINY_MODELS, TINY_SIZES, ModelLoadError
from primenb.engine.plan import PlanError, build_plan
from primenb.protocol.rundir import FINAL_STATES, STATES, RunDir

__all__ = [
    "DEFAULT_MODEL",
    "ENGINE_MODULE",
    "FINAL_STATES",
    "STATES",
    "TINY_MODELS",
    "TINY_SIZES",
    "ModelLoadError",
    "PlanError",
    "RunDir",
    "build_plan",
    "launch_command",
]
