#!/usr/bin/env bash
# ASR engine throughput on one GPU, audio seconds per second: each engine in-process (its limit) and
# through audio-reward serve over loopback, and our vLLM engine against vLLM's own `vllm serve`.
#
# Needs no network and installs nothing: a Python with this project and whichever engine packages
# the machine has (torch with CUDA, transformers>=5.24, faster-whisper + ctranslate2, vllm).
# What is missing is reported and its rows skipped.  The assets (speech + the Whisper tokenizer) are
# made here when the dev extras are installed, or beforehand on any machine that has them:
#
#   python -m bench.engine_throughput prepare --assets bench/.gpu-assets
#   bash bench/gpu_engines.sh
#
# Models: random weights of Whisper-large-v3's and Qwen3-ASR-0.6B's shapes built from their config
# classes, on the GPU, with the end-of-text rows of the output embedding zeroed: greedy decoding never
# stops early, so every engine decodes exactly its token cap per clip (8 tokens per second of audio,
# 16 to 224) and the speed is comparable; the transcripts are garbage.  WHISPER_MODEL / QWEN3_ASR_MODEL
# (real transformers checkpoint folders) replace them.  faster-whisper runs the Whisper checkpoint
# converted by ct2-transformers-converter.  vLLM reads the original Qwen3-ASR format only, so the
# Qwen3-ASR vLLM rows run only with QWEN3_ASR_VLLM_MODEL set.
#
# Budget: under 8 minutes (BUDGET_S=460 for everything; each step gets at most STEP_TIMEOUT and never
# more than what is left); a step with under 30 s left is reported as skipped.  Prints a table; the rows stay in $OUT.
# Smoke test on a CPU: SIZE=tiny DEVICE=cpu UTTERANCES=8 BATCH=8 REPEATS=1 bash bench/gpu_engines.sh
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python}
ASSETS=${ASSETS:-bench/.gpu-assets}
OUT=${OUT:-$(mktemp -d)}
WORK=${WORK:-${TMPDIR:-/tmp}/audio-reward-bench}
SIZE=${SIZE:-full}
DEVICE=${DEVICE:-cuda}
UTTERANCES=${UTTERANCES:-128}
BATCH=${BATCH:-32}
CONCURRENCY=${CONCURRENCY:-128}
REPEATS=${REPEATS:-2}
STEP_TIMEOUT=${STEP_TIMEOUT:-240}
BUDGET_S=${BUDGET_S:-460}
ROWS="$OUT/rows.jsonl"
mkdir -p "$OUT" "$WORK"
: > "$ROWS"
START=$SECONDS
MISSING=()

have_module() { "$PY" -c "import $1" >/dev/null 2>&1; }

if [ ! -f "$ASSETS/speech.npz" ]; then
  echo "== preparing assets in $ASSETS" >&2
  "$PY" -m bench.engine_throughput prepare --assets "$ASSETS" >&2 || {
    echo "no assets in $ASSETS and they cannot be made here (needs the dev extras: hibari-tts, the packaged Whisper base);" \
         "run 'python -m bench.engine_throughput prepare --assets $ASSETS' on a machine that has them" >&2
    exit 2
  }
fi
"$PY" - <<'EOF' || { echo "warning: torch sees no CUDA device; GPU rows will fail or run on the CPU" >&2; }
import sys, torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", file=sys.stderr)
sys.exit(0 if torch.cuda.is_available() else 1)
EOF
have_module transformers || MISSING+=("transformers (all rows)")
have_module transformers.models.qwen3_asr || MISSING+=("native Qwen3-ASR (transformers>=5.24): Qwen3-ASR rows")
HAVE_FW=1; { have_module faster_whisper && have_module ctranslate2 && command -v ct2-transformers-converter >/dev/null; } \
  || { HAVE_FW=0; MISSING+=("faster-whisper / ctranslate2 / ct2-transformers-converter: faster-whisper rows"); }
HAVE_VLLM=1; { have_module vllm && command -v vllm >/dev/null; } || { HAVE_VLLM=0; MISSING+=("vllm: vllm and vllm-serve rows"); }

skip_row() {  # skip_row ENGINE ARCH VIA WHY
  echo "{\"engine\": \"$1\", \"arch\": \"$2\", \"via\": \"$3\", \"device\": \"$DEVICE\", \"utterances\": $UTTERANCES, \"audio_s\": 0, \"error\": \"skipped: $4\"}" \
    | tee -a "$ROWS" >&2
}

time_left() {  # seconds this step may take: STEP_TIMEOUT, or what is left of the budget
  local left=$(( BUDGET_S - (SECONDS - START) ))
  (( left < STEP_TIMEOUT )) && echo "$left" || echo "$STEP_TIMEOUT"
}

step() {  # step ENGINE ARCH VIA [MODEL]
  local engine=$1 arch=$2 via=$3 model=${4:-} limit
  limit=$(time_left)
  if (( limit < 30 )); then skip_row "$engine" "$arch" "$via" "time budget spent"; return; fi
  local args=(run --assets "$ASSETS" --engine "$engine" --arch "$arch" --size "$SIZE" --device "$DEVICE" --via "$via"
              --utterances "$UTTERANCES" --batch "$BATCH" --concurrency "$CONCURRENCY" --repeats "$REPEATS" --work "$WORK")
  [ -n "$model" ] && args+=(--model "$model")
  echo "== $engine $via ($arch${model:+, $model}) at $((SECONDS - START)) s" >&2
  local log="$OUT/$engine-$arch-${via// /-}.log" line rc
  line=$(timeout --kill-after=10 "$limit" "$PY" -m bench.engine_throughput "${args[@]}" 2>"$log" | tail -n 1)
  rc=$?
  if [ -z "$line" ] || [ "${line:0:1}" != "{" ]; then
    line="{\"engine\": \"$engine\", \"arch\": \"$arch\", \"via\": \"$via\", \"device\": \"$DEVICE\", \"utterances\": $UTTERANCES, \"audio_s\": 0, \"error\": \"exit $rc, see $log\"}"
  fi
  echo "$line" | tee -a "$ROWS" >&2
}

build() {  # build ARCH: random checkpoints (and the CTranslate2 conversion) once, outside the timed steps
  echo "== building random $1 ($SIZE) at $((SECONDS - START)) s" >&2
  timeout --kill-after=10 "$(time_left)" "$PY" -m bench.engine_throughput build --assets "$ASSETS" --arch "$1" --size "$SIZE" \
    --device "$DEVICE" --work "$WORK" >&2 || echo "warning: building $1 failed; its rows will report why" >&2
}

[ -z "${WHISPER_MODEL:-}" ] && build whisper
if [ "$HAVE_FW" = 1 ]; then
  step faster-whisper whisper in-process "${WHISPER_MODEL:-}"
  step faster-whisper whisper server "${WHISPER_MODEL:-}"
else
  skip_row faster-whisper whisper in-process "faster-whisper not installed"
fi
step transformers whisper in-process "${WHISPER_MODEL:-}"
step transformers whisper server "${WHISPER_MODEL:-}"
if [ "$HAVE_VLLM" = 1 ]; then
  step vllm whisper in-process "${WHISPER_MODEL:-}"
  step vllm whisper server "${WHISPER_MODEL:-}"
  step vllm-serve whisper server "${WHISPER_MODEL:-}"
else
  skip_row vllm whisper in-process "vllm not installed"
fi
if have_module transformers.models.qwen3_asr; then
  [ -z "${QWEN3_ASR_MODEL:-}" ] && build qwen3_asr
  step transformers qwen3_asr in-process "${QWEN3_ASR_MODEL:-}"
  step transformers qwen3_asr server "${QWEN3_ASR_MODEL:-}"
fi
if [ "$HAVE_VLLM" = 1 ] && [ -n "${QWEN3_ASR_VLLM_MODEL:-}" ]; then
  step vllm qwen3_asr in-process "$QWEN3_ASR_VLLM_MODEL"
  step vllm qwen3_asr server "$QWEN3_ASR_VLLM_MODEL"
  step vllm-serve qwen3_asr server "$QWEN3_ASR_VLLM_MODEL"
fi

echo
"$PY" -m bench.engine_throughput table "$ROWS"
if [ ${#MISSING[@]} -gt 0 ]; then
  echo "missing on this machine (rows skipped):"
  printf '  - %s\n' "${MISSING[@]}"
fi
echo "(rows: $ROWS; logs: $OUT; $((SECONDS - START)) s)"
