#!/usr/bin/env bash
# GRPO on Qwen3-TTS-12Hz-0.6B-Base codec-0 with the audio-reward scorer.
#
# Needs: verl-omni (its vLLM-Omni TTS rollout) and audio-reward installed in the
# trainer environment, GPUs, and a running scorer (`audio-reward serve`).
#   MODEL_PATH       local Qwen3-TTS-12Hz-0.6B-Base folder
#   TRAIN_FILE       train parquet (prepare_data.py)
#   VAL_FILE         validation parquet
#   SPK_EMBED_PATH   speaker embedding JSON for the fixed voice (verl-omni)
#   AUDIO_REWARD_URL scorer base URL, e.g. http://scorer:8000
# Optional: OUTPUT_DIR, NUM_GPUS, TOTAL_TRAINING_STEPS, TEST_FREQ, SAVE_FREQ, PYTHON_BIN.
# Extra arguments are Hydra overrides, e.g. `bash run.sh actor_rollout_ref.rollout.n=4`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${MODEL_PATH:?set MODEL_PATH to a local Qwen3-TTS-12Hz-0.6B-Base folder}"
: "${TRAIN_FILE:?set TRAIN_FILE}"
: "${VAL_FILE:?set VAL_FILE}"
: "${SPK_EMBED_PATH:?set SPK_EMBED_PATH to a speaker embedding JSON}"
: "${AUDIO_REWARD_URL:?set AUDIO_REWARD_URL to the scorer base URL}"
OUTPUT_DIR="${OUTPUT_DIR:-outputs/qwen3_tts_grpo}"
NUM_GPUS="${NUM_GPUS:-2}"
PYTHON_BIN="${PYTHON_BIN:-python3}"
export MODEL_PATH TRAIN_FILE VAL_FILE AUDIO_REWARD_URL
export TOKENIZERS_PARALLELISM=false VLLM_USE_FLASHINFER_SAMPLER=0
mkdir -p "$OUTPUT_DIR"

COMMON=(
    "trainer.n_gpus_per_node=${NUM_GPUS}"
    "trainer.total_training_steps=${TOTAL_TRAINING_STEPS:-500}"
    "trainer.test_freq=${TEST_FREQ:-20}"
    "trainer.save_freq=${SAVE_FREQ:-20}"
    "trainer.default_local_dir=${OUTPUT_DIR}/checkpoints"
    "trainer.validation_data_dir=${OUTPUT_DIR}/validation"
    "reward.audio_reward.validation_dir=${OUTPUT_DIR}/validation_audio"
    "+actor_rollout_ref.model.override_config.tts_language=Auto"
    "+actor_rollout_ref.model.override_config.tts_spk_embed_path=${SPK_EMBED_PATH}"
)

# Fail in seconds on a wrong setting: scorer reachable, group size, reward wiring, data columns.
# (Composes the verl-only twin of the config: verl-omni's keys do not change these checks.)
"${PYTHON_BIN}" -m audio_reward.cli preflight qwen3_tts_grpo "${COMMON[@]}" "$@"

"${PYTHON_BIN}" -m verl_omni.trainer.main_omni \
    --config-path="${HERE}/config" --config-name=qwen3_tts_grpo_omni \
    "${COMMON[@]}" "$@" 2>&1 | tee "${OUTPUT_DIR}/train.log"
