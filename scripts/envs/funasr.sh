#!/usr/bin/env bash
# Build the FunASR environment: CPU torch, audio-reward's server with the funasr extra (FunASR 1.4, the
# toolkit Seed-TTS-eval's run_wer.py loads Paraformer-zh with) and the test tools. Its own venv because
# FunASR brings modelscope, hydra and umap-learn, which the main environment does not need.
#
# No torchaudio: PyPI has none for the CPU torch 2.13 (its newest, 2.11, is a CUDA build for torch 2.11).
# FunASR 1.4 then takes its Kaldi fbank from kaldi-native-fbank (the extra's funasr[knf];
# funasr/utils/fbank.py) and reads audio files with soundfile (funasr/utils/load_utils.py).
#
# Usage: scripts/envs/funasr.sh [VENV_DIR]   (default: this script's checkout/.venv-funasr)
#
# Then:  "$VENV/bin/python" -m pytest -q tests/integration/engines/test_funasr_engine.py
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO/.venv-funasr}"

# shellcheck source=torch_venv.sh
source "$REPO/scripts/envs/torch_venv.sh"
torch_venv "$VENV"
"$VENV/bin/pip" install -q "torch==2.13.0" -e "$REPO[server,funasr]" \
    "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3" "httpx>=0.27"
"$VENV/bin/python" - <<'PY'
import funasr, torch
print(f"funasr {funasr.__version__}  torch {torch.__version__}")
PY
