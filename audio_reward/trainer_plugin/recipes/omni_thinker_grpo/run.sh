#!/usr/bin/env bash
# GRPO on the Qwen3-Omni-30B-A3B thinker for audio multiple-choice QA.
# Needs verl (vLLM rollout) + audio-reward in the trainer environment and 8 GPUs by default.
#   MODEL_PATH  local Qwen3-Omni-30B-A3B-Instruct folder
#   TRAIN_FILE / VAL_FILE  parquet from prepare_data.py
# Optional: OUTPUT_DIR, NUM_GPUS, PYTHON_BIN; extra arguments are Hydra overrides.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${MODEL_PATH:?set MODEL_PATH}"
: "${TRAIN_FILE:?set TRAIN_FILE}"
: "${VAL_FILE:?set VAL_FILE}"
OUTPUT_DIR="${OUTPUT_DIR:-outputs/omni_thinker_grpo}"
PYTHON_BIN="${PYTHON_BIN:-python3}"
export MODEL_PATH TRAIN_FILE VAL_FILE TOKENIZERS_PARALLELISM=false
mkdir -p "$OUTPUT_DIR"
COMMON=(
    "trainer.n_gpus_per_node=${NUM_GPUS:-8}"
    "trainer.default_local_dir=${OUTPUT_DIR}/checkpoints"
    "trainer.validation_data_dir=${OUTPUT_DIR}/validation"
)
"${PYTHON_BIN}" -m audio_reward.cli preflight omni_thinker_grpo "${COMMON[@]}" "$@"
"${PYTHON_BIN}" -m verl.trainer.main_ppo \
    --config-path="${HERE}/config" --config-name=omni_thinker_grpo \
    "${COMMON[@]}" "$@" 2>&1 | tee "${OUTPUT_DIR}/train.log"
