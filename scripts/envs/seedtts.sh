#!/usr/bin/env bash
# Build the Seed-TTS-eval reference environment: the libraries Seed-TTS-eval's
# run_wer.py scores with (jiwer 3.x, whose compute_measures jiwer 4 removed;
# zhon; zhconv) and audio-reward's scoring code, so the parity test can run the
# benchmark's rules and ours side by side.
#
# Usage: scripts/envs/seedtts.sh [VENV_DIR] [REPO]
#   VENV_DIR  default: REPO/.venv-seedtts
#   REPO      the audio-reward checkout to install editable (default: this script's checkout)
#
# Then:  "$VENV_DIR/bin/python" -m pytest -q --noconftest tests/unit/scoring/test_seedtts_parity.py
set -euo pipefail
REPO="$(cd "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
VENV="${1:-$REPO/.venv-seedtts}"
PY="${PYTHON:-python3.11}"

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --upgrade pip
# The reference's libraries, the scoring code's own needs (rapidfuzz, zhon, zhconv),
# pytest (pytest-asyncio only so the project's pytest options are known), then the
# package with its base dependencies (light: no server, no torch).
"$VENV/bin/pip" install -q "jiwer==3.*" "zhon>=2.0" "zhconv>=1.4" "rapidfuzz>=3.0" \
    "pytest>=8" "pytest-timeout>=2.3" "pytest-asyncio>=0.23"
"$VENV/bin/pip" install -q -e "$REPO"
