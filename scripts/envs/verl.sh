#!/usr/bin/env bash
# Build the trainer-side environment: verl 0.9.1 (CPU torch) + audio-reward's
# client side and its test dependencies.
#
# Usage: scripts/envs/verl.sh [VENV_DIR]   (default /work/venv-verl)
#
# verl pins transformers>=5.5.3,<5.11, which cannot live beside qwen-tts
# (transformers==4.57.3) or the scorer server, hence its own venv.
# torch is installed first and pinned so that verl's dependency resolution
# keeps the CPU wheel instead of pulling a CUDA build.
set -euo pipefail
VENV="${1:-/work/venv-verl}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-python3.11}"

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install --upgrade pip
"$VENV/bin/pip" install "torch==2.13.0"
"$VENV/bin/pip" install "torch==2.13.0" "verl[verl-core]==0.9.1"
"$VENV/bin/pip" install "torch==2.13.0" -e "$REPO[dev,verl,recipes]"
"$VENV/bin/python" - <<'PY'
import verl, torch, transformers
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase  # noqa: F401
print(f"verl {verl.__version__}  torch {torch.__version__}  transformers {transformers.__version__}")
PY
