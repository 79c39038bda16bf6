#!/usr/bin/env bash
# Set up the verl test environment: a virtualenv in .venv-verl with the CPU torch
# pin, verl 0.9.1 (which brings tensordict, Ray 2.60 and transformers 5.10.x),
# flowmap editable and pytest. It is separate from .venv because verl pins
# transformers<5.11 while the TRL extra pins 5.24. Idempotent: pip runs again
# only when this script, pyproject.toml or setup.py changed.
#
# Usage: bash scripts/setup-verl.sh   (then: .venv-verl/bin/python -m pytest tests/integration/test_verl.py)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv-verl

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup-verl: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp=$VENV/.flowmap-installed
want="$(cat "$0" pyproject.toml setup.py | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup-verl: installing torch==2.13.0 (CPU), verl==0.9.1, flowmap (editable), pytest"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  # torch first and pinned: verl would otherwise pull a multi-GB CUDA build.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q "verl==0.9.1" "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q -e . "pytest>=8"
  echo "$want" > "$stamp"
fi
