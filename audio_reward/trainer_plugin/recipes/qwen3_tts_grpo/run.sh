#!/usr/bin/env bash
# GRPO on Qwen3-TTS-12Hz-0.6B-Base codec-0, rewarded by the audio-reward scorer, on verl-omni's
# vLLM-Omni TTS rollout (pipeline qwen3_tts_rl) through verl_omni.trainer.main_omni.
#
# Needs: the trainer environment of docs/training.md (verl-omni + audio-reward), GPUs, and a running
# scorer (`audio-reward serve`).
#   MODEL_PATH       local Qwen3-TTS-12Hz-0.6B-Base folder
#   TRAIN_FILE       train parquet (prepare_data.py)
#   VAL_FILE         validation parquet
#   SPK_EMBED_PATH   speaker embedding JSON (`audio-reward tts-speaker REF.wav --out voice.json`)
#   AUDIO_REWARD_URL scorer base URL, e.g. http://scorer:8000
# Optional: SPK_REF_WAV, OUTPUT_DIR, NUM_GPUS, SEED, TOTAL_TRAINING_STEPS, TEST_FREQ, SAVE_FREQ,
# RESUME_MODE, MAX_FAILED_GROUPS, SCORER_LANGUAGE
# (`python -m audio_reward.trainer_plugin.recipes.launch --help` lists them with their defaults), and
# PYTHON_BIN (default: the python of the `audio-reward` command on PATH, else python3).
# Extra arguments are Hydra overrides, e.g. `bash run.sh actor_rollout_ref.rollout.n=4`.
# AUDIO_REWARD_DRY_RUN=1 prints the environment and the trainer command instead of running them.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../_launch.sh" qwen3_tts_grpo "$@"
