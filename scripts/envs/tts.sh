#!/usr/bin/env bash
# Build the TTS-model environment used by the tiny Qwen3-TTS policy test and the checkpoint
# evaluation: CPU torch, qwen-tts (pins transformers==4.57.3) and audio-reward's client side.
#
# Usage: scripts/envs/tts.sh [VENV_DIR]   (default: this checkout's .venv-tts)
#
# qwen-tts imports torchaudio at module level, which has no wheel for torch
# 2.13; only its 25 Hz tokenizer path (torchaudio.compliance.kaldi.fbank) uses
# it, so code run here must put a stand-in torchaudio package on sys.path (the
# tiny Qwen3-TTS test does so itself when torchaudio cannot load):
#
#   AUDIO_REWARD_TEST_SERVER_PYTHON=.venv/bin/python \
#       "$VENV/bin/python" -m pytest -q tests/integration/trainer/test_tiny_qwen3_tts.py
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO/.venv-tts}"
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
# verl's checkpoint code, for the export test (tests/integration/trainer/test_export_checkpoint.py): the test
# writes its input with verl 0.9.1's own FSDPCheckpointManager over a tiny Qwen3-TTS. verl's metadata wants
# transformers>=5.5.3, which qwen-tts cannot run under, but verl.utils.checkpoint imports with 4.57.3, so verl
# comes without its dependencies, plus exactly what that import needs (datasets 4.0 and dill 0.3.8 fit the
# huggingface-hub that transformers 4.57.3 keeps).
"$VENV/bin/pip" install --no-deps "verl==0.9.1" "ray==2.60.0" "tensordict==0.10.0" "pyvers==0.1.0" \
    "omegaconf==2.3.1" "antlr4-python3-runtime==4.9.3" "peft==0.21.2" "datasets==4.0.0" "dill==0.3.8" \
    "multiprocess==0.70.16" "xxhash==4.1.0" "codetiming==1.4.0"
"$VENV/bin/python" -W ignore -c "from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager"
