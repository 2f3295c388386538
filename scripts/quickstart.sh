#!/usr/bin/env bash
# Install xcore-core and xcore-xlocal into ./.venv, then launch the 20-trial sweep on this machine
# and wait for it. Needs only Python 3.11+.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python.sh
ensure_venv
drop_renamed_core
echo "==> installing xcore-core and xcore-xlocal into .venv"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e . -e plugins/xlocal
echo "==> launching examples/sweep/launch.py (20 trials)"
.venv/bin/xcore launch --wait examples/sweep/launch.py
id=$(.venv/bin/xcore list --json -n 1 | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
.venv/bin/xcore show "$id"
echo
echo "Next: .venv/bin/xcore logs $id/1   |   .venv/bin/xcore list   |   source .venv/bin/activate"
