#!/usr/bin/env bash
# The whole GRPO loop through real verl on the toy TTS task (audio_reward/trainer_plugin/toy_task): verl's
# vLLM rollout, our reward manager scoring every rollout over HTTP against a real scorer, validation, a
# checkpoint, `audio-reward export-checkpoint` on it and the before/after evaluation. scripts/train_cpu.sh
# runs it on the CPU (DEVICE=cpu, vLLM's CPU build), scripts/gpu_smoke_grpo.sh on a GPU (DEVICE=cuda).
#
#   DEVICE=cpu|cuda bash scripts/toy_loop.sh OUT [HYDRA_OVERRIDES...]
#
# Writes OUT/train_summary.json (steps, reward_mean per step, rollout, checkpoint, export, eval_results,
# wall_s), OUT/reward_curve.json and .png, OUT/train.log. Settings (environment):
#   VENV            the trainer environment (default: this checkout's .venv-verl, which scripts/envs/verl.sh
#                   builds for the CPU; on a GPU, verl 0.9.1 with CUDA torch, vllm and audio-reward[server,eval])
#   SCORER          instant (default: the instant engine, answers at once), or tiny.en (Whisper tiny.en; the
#                   policy's words are spoken by espeak-ng)
#   SCORER_URL      a running scorer to use instead of starting one (SPEECH says what it hears: instant, espeak)
#   STEPS           GRPO steps (default: 12, the thinker loop 3); FAILURE_POLICY raise (default) or mask
#   LOOP_ARGS       further launcher flags (python -m audio_reward.trainer_plugin.toy_task.train --help)
#   THINKER=1       the thinker-shaped loop instead (audio questions, multiple-choice reward)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: DEVICE=cpu|cuda bash scripts/toy_loop.sh OUT [HYDRA_OVERRIDES...]}"
DEVICE="${DEVICE:-cpu}"
shift
VENV="${VENV:-$REPO/.venv-verl}"
# absolute: the scorer starts from the repository's folder, not from where the command was typed
[[ -d "$VENV" ]] && VENV="$(cd "$VENV" && pwd)"
PY="$VENV/bin/python"
if ! "$PY" -c 'import verl, vllm, audio_reward.scorer_server.app' >/dev/null 2>&1; then
    echo "toy_loop.sh: $VENV is not a trainer environment with verl, vllm and the scorer; on a CPU build it" \
         "with: bash scripts/envs/verl.sh $VENV" >&2
    exit 2
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SCORER="${SCORER:-instant}"
case "$SCORER" in
    instant) SPEECH="${SPEECH:-instant}"; SERVE=(-m tests.testkit.instant_engine) ;;
    tiny.en) SPEECH="${SPEECH:-espeak}"; SERVE=(-m audio_reward.cli serve --model tiny.en)
             command -v espeak-ng >/dev/null || { echo "toy_loop.sh: SCORER=tiny.en needs espeak-ng" \
                 "(apt-get install -y espeak-ng)" >&2; exit 2; } ;;
    *) echo "toy_loop.sh: SCORER must be instant or tiny.en, got '$SCORER'" >&2; exit 2 ;;
esac

THINKER="${THINKER:-0}"
SCORER_PID=""
# The scorer this script starts runs in a session of its own: Ctrl-C reaches the terminal's foreground process
# group, and a scorer in it would stop serving at once while the trainer still scores its last rollouts, failing
# them (fail-closed) before the driver has stopped the trainer. It goes with the script instead, however the
# script ends, once the trainer has stopped: SIGTERM, then SIGKILL if it has not drained within 10 s.
cleanup() {
    [[ -n "$SCORER_PID" ]] || return 0
    kill "$SCORER_PID" 2>/dev/null || return 0
    for _ in $(seq 1 20); do kill -0 "$SCORER_PID" 2>/dev/null || return 0; sleep 0.5; done
    kill -9 "$SCORER_PID" 2>/dev/null || true
}
trap cleanup EXIT
# the thinker loop's multiple-choice reward needs no scorer
if [[ -z "${SCORER_URL:-}" && "$THINKER" != 1 ]]; then
    PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    (cd "$REPO" && exec setsid "$PY" "${SERVE[@]}" --host 127.0.0.1 --port "$PORT") >"$OUT/scorer.log" 2>&1 &
    SCORER_PID=$!
    SCORER_URL="http://127.0.0.1:$PORT"
    echo "toy_loop.sh: starting the scorer ($SCORER) at $SCORER_URL; its log: $OUT/scorer.log" >&2
    for _ in $(seq 1 180); do
        curl -fsS "$SCORER_URL/readyz" >/dev/null 2>&1 && break
        kill -0 "$SCORER_PID" 2>/dev/null || { echo "toy_loop.sh: the scorer exited; see $OUT/scorer.log" >&2; exit 1; }
        sleep 1
    done
fi
# a scoring URL (.../score, .../v1/score, a trailing /) is the scorer at its base, as the client reads it
BASE="${SCORER_URL:-}"; BASE="${BASE%/}"; BASE="${BASE%/batch}"; BASE="${BASE%/score}"; BASE="${BASE%/v1}"
if [[ -n "$BASE" ]] && ! curl -fsS "$BASE/readyz" >/dev/null; then
    echo "toy_loop.sh: no scorer ready at $SCORER_URL" >&2
    exit 1
fi

LOOP=audio_reward.trainer_plugin.toy_task.train
[[ "$THINKER" == 1 ]] && LOOP=audio_reward.trainer_plugin.toy_task.thinker
ARGS=(--device "$DEVICE" --speech "$SPEECH")
[[ -n "${SCORER_URL:-}" ]] && ARGS+=(--scorer-url "$SCORER_URL")
# unset: each loop's own default
[[ -n "${STEPS:-}" ]] && ARGS+=(--steps "$STEPS")
[[ -n "${FAILURE_POLICY:-}" ]] && ARGS+=(--failure-policy "$FAILURE_POLICY")
# shellcheck disable=SC2086  # LOOP_ARGS holds several flags
"$PY" -m "$LOOP" "$OUT" "${ARGS[@]}" ${LOOP_ARGS:-} -- "$@"
