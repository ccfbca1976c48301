#!/usr/bin/env bash
# The whole GRPO loop on a CPU through real verl, in minutes: the toy TTS task, verl's vLLM rollout on vLLM's
# CPU build, our reward manager against a real scorer (the instant engine; SCORER=tiny.en for Whisper), then
# export-checkpoint and the before/after evaluation of the run's own checkpoint. For checking a training
# setup before a GPU run, and for CI. Settings and outputs: scripts/toy_loop.sh.
#
#   bash scripts/train_cpu.sh OUT [HYDRA_OVERRIDES...]      (in the environment scripts/envs/verl.sh builds)
set -euo pipefail
DEVICE=cpu exec bash "$(dirname "${BASH_SOURCE[0]}")/toy_loop.sh" "$@"
