#!/usr/bin/env bash
# ASR engine throughput on one GPU: faster-whisper, transformers and our vLLM engine against
# vLLM's own transcription server (`vllm serve` + /v1/audio/transcriptions), audio seconds per second.
#
# The GPU machine needs no network and installs nothing: it needs a Python with this project
# and the engines' packages (torch with CUDA, transformers>=5.24, faster-whisper, vllm>=0.33),
# plus an assets folder made beforehand on any machine with the dev extras:
#
#   python bench/engine_throughput.py prepare --assets bench/.gpu-assets      # speech + Whisper tokenizer
#   bash bench/gpu_engines.sh                                                   # on the GPU machine
#
# Models: WHISPER_MODEL / QWEN3_ASR_MODEL (real transformers checkpoint folders) when set;
# otherwise random weights of Whisper-large-v3's / Qwen3-ASR-1.7B's shapes built from their
# config classes (the transcripts are garbage; the work per token is the real one).  vLLM reads
# the original Qwen3-ASR format only, so the Qwen3-ASR vLLM rows run only with
# QWEN3_ASR_VLLM_MODEL set.  Every step has its own time limit; a failed step prints its error
# in its row and the others still run.  Prints a table; the rows are kept in $OUT (or a temp dir).
# Smoke test on a CPU: SIZE=tiny DEVICE=cpu UTTERANCES=8 BATCH=8 REPEATS=1 bash bench/gpu_engines.sh
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python}
ASSETS=${ASSETS:-bench/.gpu-assets}
OUT=${OUT:-$(mktemp -d)}
WORK=${WORK:-${TMPDIR:-/tmp}/audio-reward-bench}
UTTERANCES=${UTTERANCES:-256}
BATCH=${BATCH:-32}
REPEATS=${REPEATS:-3}
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
ROWS="$OUT/rows.jsonl"
mkdir -p "$OUT" "$WORK"
: > "$ROWS"

if [ ! -f "$ASSETS/speech.npz" ]; then
  echo "no assets in $ASSETS: run 'python bench/engine_throughput.py prepare --assets $ASSETS' first" >&2
  exit 2
fi
"$PY" - <<'EOF' || echo "warning: torch sees no CUDA device; rows will fail or run on the CPU" >&2
import torch, sys
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
sys.exit(0 if torch.cuda.is_available() else 1)
EOF

step() {  # step ENGINE ARCH [MODEL]
  local engine=$1 arch=$2 model=${3:-}
  local args=(run --assets "$ASSETS" --engine "$engine" --arch "$arch" --size "${SIZE:-full}" --device "${DEVICE:-cuda}"
              --utterances "$UTTERANCES" --batch "$BATCH" --repeats "$REPEATS" --work "$WORK")
  [ -n "$model" ] && args+=(--model "$model")
  echo "== $engine ($arch${model:+, $model})" >&2
  local line
  line=$(timeout --kill-after=30 "$STEP_TIMEOUT" "$PY" bench/engine_throughput.py "${args[@]}" 2>"$OUT/$engine-$arch.log" | tail -n 1)
  local rc=$?
  if [ -z "$line" ] || [ "${line:0:1}" != "{" ]; then
    line="{\"engine\": \"$engine\", \"arch\": \"$arch\", \"device\": \"cuda\", \"utterances\": $UTTERANCES, \"audio_s\": 0, \"error\": \"exit $rc, see $OUT/$engine-$arch.log\"}"
  fi
  echo "$line" | tee -a "$ROWS" >&2
}

for engine in vllm-serve vllm transformers faster-whisper; do
  step "$engine" whisper "${WHISPER_MODEL:-}"
done
step transformers qwen3_asr "${QWEN3_ASR_MODEL:-}"
if [ -n "${QWEN3_ASR_VLLM_MODEL:-}" ]; then
  step vllm-serve qwen3_asr "$QWEN3_ASR_VLLM_MODEL"
  step vllm qwen3_asr "$QWEN3_ASR_VLLM_MODEL"
fi

echo
"$PY" bench/engine_throughput.py table "$ROWS"
echo "(rows: $ROWS; logs: $OUT)"
