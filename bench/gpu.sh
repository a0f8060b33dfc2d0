#!/usr/bin/env bash
# primenb vs bare TRL on an NVIDIA GPU: ~0.5 B model from config, bf16, full and LoRA.
# Needs the project's .venv (make venv) with a CUDA build of torch; finishes in about 6-8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
PY=${PY:-.venv/bin/python}
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible to torch'; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
timeout 480 "$PY" bench/bench_gpu.py "$@"
