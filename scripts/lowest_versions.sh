#!/usr/bin/env bash
# The fast tier (tests/unit) on the lowest versions pyproject.toml allows for the client and server extras.
#
#   bash scripts/lowest_versions.sh [VENV] [extra pytest args]      # VENV: default .venv-lowest, rebuilt each run
#
# A declared lower bound is a promise; this job keeps it. In a fresh venv, uv (from PyPI: pip's resolver has
# no lowest mode) installs '.[server]' with --resolution lowest-direct: every direct dependency at its lower
# bound, theirs as the resolver finds. --no-build: a bound whose release has no wheel for this Python would be
# built from source (av 11 needs FFmpeg's headers); uv then takes the next release with a wheel, and
# scripts/check_lowest_versions.py fails on any dependency installed above its bound, naming it. The test
# tools go in after, constrained to what is installed, so they change no version. About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-lowest}
shift || true
PY=${PYTHON:-python3}
start=$SECONDS
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q uv
uv_install() { "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-build "$@"; }
uv_install --resolution lowest-direct -e ".[server]"
"$VENV/bin/uv" pip freeze -q --python "$VENV/bin/python" --exclude-editable > "$VENV/lowest.txt"
uv_install -c "$VENV/lowest.txt" pytest pytest-asyncio pytest-timeout hypothesis httpx jsonschema psutil jiwer
"$VENV/bin/python" scripts/check_lowest_versions.py server
echo "lowest versions: installed in $((SECONDS - start)) s"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit "$@"
