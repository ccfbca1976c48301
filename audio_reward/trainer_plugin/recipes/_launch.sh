#!/usr/bin/env bash
# Shared body of the recipes' run.sh: the launch plan (launch.py), the preflight, then
# verl-omni's trainer (python -m verl_omni.trainer.main_omni) with the plan's overrides.
#
# Usage: _launch.sh RECIPE [HYDRA_OVERRIDES...]
# AUDIO_REWARD_DRY_RUN=1 prints the plan (NAME=value lines, "--", one command word per line)
# and exits without running anything else.
#
# The Python that runs all of it: PYTHON_BIN when set, else the interpreter of the `audio-reward`
# command found on PATH (the environment audio-reward is installed in), else python3.
set -euo pipefail
RECIPE="$1"
shift

find_python() {
    if [[ -n "${PYTHON_BIN:-}" ]]; then
        PYTHON_BIN_FROM="PYTHON_BIN"
        return
    fi
    local command_path first interpreter
    if command_path="$(command -v audio-reward)"; then
        # pip writes the environment's interpreter into the command's first line.
        IFS= read -r first < "$command_path" || true
        interpreter="${first#\#!}"
        interpreter="${interpreter%% *}"
        if [[ "$first" == "#!"* && -x "$interpreter" && "$(basename "$interpreter")" == python* ]]; then
            PYTHON_BIN="$interpreter"
        elif [[ -x "$(dirname "$command_path")/python" ]]; then
            PYTHON_BIN="$(dirname "$command_path")/python"
        fi
        if [[ -n "${PYTHON_BIN:-}" ]]; then
            PYTHON_BIN_FROM="the audio-reward command at $command_path"
            return
        fi
    fi
    PYTHON_BIN=python3
    PYTHON_BIN_FROM="the first python3 on PATH: PYTHON_BIN is not set and no audio-reward command is on PATH"
}

find_python
if ! import_error="$("$PYTHON_BIN" -c 'import audio_reward.trainer_plugin.recipes.launch' 2>&1)"; then
    reason="$(printf '%s\n' "$import_error" | tail -n 1)"
    echo "run.sh: tried $(command -v "$PYTHON_BIN" || echo "$PYTHON_BIN") ($PYTHON_BIN_FROM), which cannot" \
         "import audio_reward (${reason:-no output}); set PYTHON_BIN=/path/to/venv/bin/python, the python of" \
         "the environment audio-reward is installed in" >&2
    exit 2
fi
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
# The checks after the run run whether or not the trainer finished: a crashed run's curve and its missing
# validation audio are what the user needs to read first. The trainer's own status is the script's.
set +e
"$PYTHON_BIN" "${CMD[@]}" 2>&1 | tee "$OUTPUT_DIR/train.log"
trainer_status=${PIPESTATUS[0]}
set -e
if [[ -s "$VERL_FILE_LOGGER_PATH" ]]; then
    "$PYTHON_BIN" -m audio_reward.trainer_plugin.reward_curve "$VERL_FILE_LOGGER_PATH" --out "$OUTPUT_DIR" \
        || echo "run.sh: no reward curve could be drawn from $VERL_FILE_LOGGER_PATH" >&2
fi
# A run whose validation wrote no audio did not measure anything: say so and fail.
check_status=0
"$PYTHON_BIN" -m audio_reward.trainer_plugin.recipes.launch --check-run "$RECIPE" "$@" || check_status=$?
if (( trainer_status != 0 )); then
    echo "run.sh: the trainer exited with $trainer_status (log: $OUTPUT_DIR/train.log)" >&2
    exit "$trainer_status"
fi
exit "$check_status"
