#!/usr/bin/env bash
# What a Binder build does, checked here: a fresh venv built ONLY from binder/ (requirements.txt,
# then postBuild in the repository root), then notebooks/01-quickstart.ipynb executed headless in
# it, with the peak memory of the whole process tree (driver + kernel + training subprocess)
# measured against Binder's ~2 GB.
#
#   bench/binder_check.sh               # PRIMENB_QUICK as in the caller's environment
#   PRIMENB_QUICK=1 bench/binder_check.sh
#
# Offline machines: when https://download.pytorch.org is unreachable, its --extra-index-url line is
# dropped and pip resolves torch==2.13.0 from its own configured indexes / find-links (which must
# hold the CPU wheel, e.g. torch-2.13.0+cpu); the script then checks that the installed torch has
# no CUDA and that no nvidia-* package came in. Everything else in the files is used as written.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${BINDER_VENV:-/tmp/binder-venv}
WORK=${BINDER_WORK:-$(mktemp -d /tmp/binder-check-XXXXXX)}
MEASURE_PY=${MEASURE_PY:-python3}  # any python with psutil, outside the venv being measured

echo "== fresh venv $VENV (python3 = $(python3 --version))"
python3 -m venv --clear "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip

REQ=binder/requirements.txt
if ! curl -s -o /dev/null --max-time 10 https://download.pytorch.org/whl/cpu/torch/; then
    echo "== download.pytorch.org unreachable: dropping its --extra-index-url, torch from pip's configured indexes"
    REQ=$WORK/requirements.txt
    grep -v '^--extra-index-url https://download.pytorch.org' binder/requirements.txt > "$REQ"
fi
echo "== pip install -r $REQ"
time python -m pip install -q -r "$REQ"
echo "== binder/postBuild"
time bash binder/postBuild

python - <<'PY'
import importlib.metadata as md

import torch

nvidia = sorted(d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia"))
print(f"torch {torch.__version__}, cuda {torch.version.cuda}, nvidia packages: {nvidia or 'none'}")
assert torch.version.cuda is None and not nvidia, "the CUDA build of torch was installed"
PY
du -sh "$VENV" | sed 's/^/== venv size: /'

echo "== run notebooks/01-quickstart.ipynb in $WORK (PRIMENB_QUICK=${PRIMENB_QUICK:-unset})"
cp notebooks/01-quickstart.ipynb "$WORK/"
cd "$WORK"
export PRIME_HOME=$WORK/home
# Binder's 2 GB keeps glibc's default malloc settings in the engine (primenb/engine/allocator.py);
# this machine has more memory, so say so, or the peak measured here would not be Binder's
export PRIMENB_MALLOC_TUNING=0
"$MEASURE_PY" "$ROOT/bench/peak_rss.py" --json "$WORK/peak_rss.json" -- \
    "$VENV/bin/jupyter" nbconvert --to notebook --execute --ExecutePreprocessor.timeout=1800 \
    --ExecutePreprocessor.kernel_name=python3 --output executed.ipynb 01-quickstart.ipynb
"$VENV/bin/python" - <<'PY'
import json

nb = json.load(open("executed.ipynb"))
errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
assert not errors, errors
text = "\n".join(
    "".join(o.get("text", "")) + "\n" + "".join(o.get("data", {}).get("text/plain", ""))
    for c in nb["cells"] for o in c.get("outputs", [])
)
print("== executed without error; the notebook's own learning check printed:")
print("\n".join(line for line in text.splitlines() if "held-out reward" in line and "->" in line))
PY
echo "== peak memory: $(python3 -c "import json;print(json.load(open('$WORK/peak_rss.json'))['peak_tree_rss_mib'])") MiB (Binder: ~2048 MiB)"
