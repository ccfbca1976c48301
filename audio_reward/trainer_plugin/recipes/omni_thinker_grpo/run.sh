#!/usr/bin/env bash
# GRPO on the Qwen3-Omni-30B-A3B thinker (LoRA, or BACKBONE=full) for audio multiple-choice QA, on verl-omni's
# vLLM-Omni rollout (pipeline qwen3_omni_moe) through verl_omni.trainer.main_omni.
#   MODEL_PATH  local Qwen3-Omni-30B-A3B-Instruct folder
#   TRAIN_FILE / VAL_FILE  parquet from prepare_data.py
# Optional: OUTPUT_DIR, NUM_GPUS (8), ROLLOUT_TP (2), BACKBONE (lora | full), TIS_THRESHOLD, MAX_FAILED_GROUPS,
# and PYTHON_BIN (default: the python of the `audio-reward` command on PATH, else python3).
# Extra arguments are Hydra overrides. AUDIO_REWARD_DRY_RUN=1 prints the plan instead of running it.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../_launch.sh" omni_thinker_grpo "$@"
