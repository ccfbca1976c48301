#!/usr/bin/env bash
# The documented-environments job: builds each install line of the README in a fresh venv and runs, in it, the
# commands the docs list for that environment (tests/environments/environments.py).
#
#   bash scripts/test_environments.sh [extra pytest args]
#
# Each README line makes a venv of its own folder; here the lines' installs go one after another into one fresh
# venv, in the README's order (client, server, eval, dev): each line's extras hold the one before's, so every
# stage holds what a fresh venv with that line holds, and the job installs each package once.
# VENV is the main environment, which runs pytest (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/audio-reward-envs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --upgrade pip

specs=$("$VENV/bin/python" -c "from tests.environments.environments import ENVIRONMENTS as E; print(' '.join(f'{e.name}={e.install_spec}' for e in E))")
for pair in $specs; do
  name=${pair%%=*} spec=${pair#*=}
  start=$SECONDS
  printf '\n== documented environment %s: pip install -e %q\n' "$name" "$spec"
  "$WORK/venv/bin/pip" install -q -e "$spec"
  echo "   installed in $((SECONDS - start)) s"
  AUDIO_REWARD_ENV=$name AUDIO_REWARD_ENV_BIN="$WORK/venv/bin" \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/environments "$@"
done
