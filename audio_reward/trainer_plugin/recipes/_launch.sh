#!/usr/bin/env bash
# Shared body of the recipes' run.sh: the launch plan (launch.py), the preflight, then
# verl-omni's trainer (python -m verl_omni.trainer.main_omni) with the plan's overrides.
#
# Usage: _launch.sh RECIPE [HYDRA_OVERRIDES...]
# AUDIO_REWARD_DRY_RUN=1 prints the plan (NAME=value lines, "--", one command word per line)
# and exits without running anything else.
set -euo pipefail
RECIPE="$1"
shift
PYTHON_BIN="${PYTHON_BIN:-python3}"
PLAN="$("$PYTHON_BIN" -m audio_reward.trainer_plugin.recipes.launch "$RECIPE" "$@")"
if [[ "${AUDIO_REWARD_DRY_RUN:-0}" == 1 ]]; then
    printf '%s\n' "$PLAN"
    exit 0
fi

CMD=()
in_command=0
while IFS= read -r line; do
    if (( in_command )); then
        CMD+=("$line")
    elif [[ "$line" == "--" ]]; then
        in_command=1
    else
        export "${line?}"
    fi
done <<< "$PLAN"

# Fail in seconds on a wrong setting: the same composed config the trainer gets is checked.
"$PYTHON_BIN" -m audio_reward.cli preflight "$RECIPE" "$@"

mkdir -p "$OUTPUT_DIR"
"$PYTHON_BIN" "${CMD[@]}" 2>&1 | tee "$OUTPUT_DIR/train.log"
# A run whose validation wrote no audio did not measure anything: say so and fail.
"$PYTHON_BIN" -m audio_reward.trainer_plugin.recipes.launch --check-run "$RECIPE" "$@"
