#!/usr/bin/env bash
# Build the TTS-model environment used by the tiny Qwen3-TTS policy test and the checkpoint
# evaluation: CPU torch, qwen-tts (pins transformers==4.57.3) and audio-reward's client side.
#
# Usage: scripts/envs/tts.sh [VENV_DIR]   (default: this checkout's .venv-tts)
#
# qwen-tts imports torchaudio at module level (its 25 Hz tokenizer, torchaudio.compliance.kaldi.fbank),
# and torchaudio's newest wheel, 2.11.1, is built for torch 2.11: its compiled libraries cannot load
# into torch 2.13 ("Could not load this library: .../_torchaudio.so"), and torchaudio loads them at
# import where they are present. Since 2.9 torchaudio is Python over torch but for those optional ops
# (forced alignment, the CTC prefix decoder), which nothing here calls; without the library files it
# imports as it does where it is deployed without them (_extension._load_lib: no file, ops off). So the
# wheel goes in and its lib/*.so come out; qwen-tts, `audio-reward tts-speaker` and the tests then run
# on the real torchaudio (kaldi.fbank is plain torch). The alternative pair, torch 2.9.1 with
# torchaudio 2.9, is a CUDA build of about 7 GB on x86_64.
#
#   AUDIO_REWARD_TEST_SERVER_PYTHON=.venv/bin/python \
#       "$VENV/bin/python" -m pytest -q tests/integration/trainer/test_tts_speaker.py
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO/.venv-tts}"
PY="${PYTHON:-python3.11}"

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install --upgrade pip
"$VENV/bin/pip" install "torch==2.13.0"
"$VENV/bin/pip" install "torch==2.13.0" "transformers==4.57.3" "torchaudio==2.11.1" "qwen-tts"
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
rm -f "$SITE"/torchaudio/lib/*.so
"$VENV/bin/python" -W ignore -c "import torchaudio.compliance.kaldi, qwen_tts"
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
