#!/usr/bin/env bash
# Build the TTS-model environment used by the tiny Qwen3-TTS policy test and the checkpoint
# evaluation: CPU torch, qwen-tts (pins transformers==4.57.3) and audio-reward's client side.
#
# Usage: scripts/envs/tts.sh [VENV_DIR]   (default /work/venv-tts)
#
# qwen-tts imports torchaudio at module level, which has no wheel for torch
# 2.13; only its 25 Hz tokenizer path (torchaudio.compliance.kaldi.fbank) uses
# it, so code run here must put a stand-in torchaudio package on sys.path (the
# tiny Qwen3-TTS test does so itself when torchaudio cannot load):
#
#   AUDIO_REWARD_TEST_SERVER_PYTHON=.venv/bin/python \
#       "$VENV/bin/python" -m pytest -q tests/integration/trainer/test_tiny_qwen3_tts.py
set -euo pipefail
VENV="${1:-/work/venv-tts}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-python3.11}"

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install --upgrade pip
"$VENV/bin/pip" install "torch==2.13.0"
"$VENV/bin/pip" install "torch==2.13.0" "transformers==4.57.3" "qwen-tts"
# The eval extra (matplotlib, tqdm), pyarrow and jsonschema: the checkpoint evaluation runs here and
# writes eval_results.json from parquet data (tests/integration/trainer/test_eval_checkpoints.py).
"$VENV/bin/pip" install "torch==2.13.0" "transformers==4.57.3" -e "$REPO[eval]" pyarrow "jsonschema>=4.20" \
    "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3" "httpx>=0.27"
