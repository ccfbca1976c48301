#!/usr/bin/env bash
# The GPU check: one prepared command for the lent GPU machine (issue 39). It measures the server
# (`audio-reward serve`, transformers engine) against the engine's in-process limit on the same GPU at
# 1, 32 and 128 requests in flight, and a GRPO step's reward burst (512 clips of 3-15 s through the
# trainer plugin's client) against the limit's time for the same audio, on random Whisper-large-v3
# weights (and Qwen3-ASR-0.6B's where the device's transformers has it). Details: bench/gpu_check.py.
#
#   bash scripts/gpu_check.sh --prepare [--python-version X.Y]...   # here, with the index: .gpu-check/
#   bash scripts/gpu_check.sh [--out DIR]                           # the device, from the carried tree
#   bash scripts/gpu_check.sh --cpu [--out DIR]                     # tiny shapes on a CPU (CI)
#   bash scripts/gpu_check.sh --wheels [--out DIR]                  # no torch: the server stack, instant engine
#
# --prepare (in the dev environment, .venv) writes .gpu-check/: wheels/cpXY/ with what the server and
#   client need beyond the device's packages (scripts/gpu_wheelhouse.py says what and why), for
#   CPython 3.12 (the device's) unless --python-version says otherwise (repeatable: CI passes its own
#   Python's version, 3.11, to install the same selection here), and assets/ (speech, the Whisper
#   tokenizer). It prints the folder's size: carry it to the device (`carry: [".gpu-check"]`).
# Otherwise the wheels of this Python are installed with no index into an overlay venv over $PYTHON
#   (default python3: on the device, the one with torch), and the check runs there. Results:
#   $OUT/gpu_check.json (one line) and $OUT/gpu_check.txt (a table); stdout ends with the JSON line.
#   $OUT, where set, is the folder whose files come back from the lent machine; --out DIR overrides it;
#   default .gpu-check/out. --wheels installs the same way on a Python without torch (CI: the device's 3.12)
#   and serves the instant engine: every wheel the server and client import at start or while serving.
# Time: BUDGET_S (default 450 s) is the whole run, install included, under the device's 8 minutes.
# Variables: PYTHON (the interpreter to build on), GPU_CHECK_DIR (default .gpu-check; --dir), BUDGET_S,
#   GPU_CHECK_VENV (the overlay venv) and GPU_CHECK_WORK (the random checkpoints: 4 GB on the GPU), both under $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
DIR=${GPU_CHECK_DIR:-.gpu-check}
MODE=gpu
OUT_DIR=${OUT:-}
PREPARE_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) MODE=prepare ;;
    --cpu) MODE=cpu ;;
    --wheels) MODE=wheels ;;
    --python-version) PREPARE_ARGS+=(--python-version "$2"); shift ;;
    --out) OUT_DIR=$2; shift ;;
    --dir) DIR=$2; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {print}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$MODE" = prepare ]; then
  # hibari-tts (the speech) and the packaged Whisper base (the tokenizer) are in the dev environment.
  PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
  exec "$PY" scripts/gpu_wheelhouse.py prepare --dir "$DIR" "${PREPARE_ARGS[@]}"
fi

PY=${PYTHON:-python3}
OUT_DIR=${OUT_DIR:-$DIR/out}
BUDGET_S=${BUDGET_S:-450}
VENV=${GPU_CHECK_VENV:-${TMPDIR:-/tmp}/audio-reward-gpu-check-venv}
WORK=${GPU_CHECK_WORK:-${TMPDIR:-/tmp}/audio-reward-gpu-check}
mkdir -p "$OUT_DIR"
echo "== install: $DIR/wheels into $VENV over $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
VPY=$("$PY" scripts/gpu_wheelhouse.py install --dir "$DIR" --venv "$VENV" | tail -n 1)
echo "== installed in $((SECONDS - START)) s; measuring ($MODE)"
LEFT=$(( BUDGET_S - (SECONDS - START) ))
PYTHONUNBUFFERED=1 "$VPY" -m bench.gpu_check --mode "$MODE" --assets "$DIR/assets" --out "$OUT_DIR" \
  --work "$WORK" --budget-s "$LEFT" 2>&1 | tee "$OUT_DIR/gpu_check.log"
