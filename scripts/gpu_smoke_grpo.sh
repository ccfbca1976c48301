#!/usr/bin/env bash
# GPU smoke test of the trainer plugin: the loop CI runs on the CPU (scripts/train_cpu.sh), on one CUDA GPU,
# with the larger rollout settings: 32 prompts a step, groups of 8. verl 0.9.1's main_ppo (FSDP2 actor, verl's
# vLLM rollout, the v1 trainer), the toy TTS task, our reward manager against a real scorer, the fail-closed
# sampler, validation, a checkpoint, its export and the before/after evaluation. No network, no download.
#
#   VENV=/venv-train bash scripts/gpu_smoke_grpo.sh OUT [HYDRA_OVERRIDES...]
#
# VENV: CUDA torch, verl[verl-core]==0.9.1, a vllm verl supports, and audio-reward[server,eval] from this
# checkout. The scorer: the instant engine by default, SCORER=tiny.en for Whisper (espeak-ng speaks), or
# SCORER_URL. OUT/train_summary.json holds the steps, the reward per step and wall_s; OUT/reward_curve.png.
set -euo pipefail
export STEPS="${STEPS:-20}"
export LOOP_ARGS="${LOOP_ARGS:---prompts-per-step 32 --group-size 8}"
DEVICE=cuda exec bash "$(dirname "${BASH_SOURCE[0]}")/toy_loop.sh" "$@"
