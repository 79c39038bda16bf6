#!/usr/bin/env bash
# Set up the verl test environment: a virtualenv in .venv-verl with the CPU torch
# pin, verl 0.9.1 (which brings tensordict, Ray 2.60 and transformers 5.10.x),
# flowmap as a regular (non-editable) install, the way users get it, and pytest. It is separate from .venv because verl pins
# transformers<5.11 while the TRL extra pins 5.24. Idempotent: verl is installed
# once; flowmap again whenever its sources changed (a few seconds, no deps).
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
want="$(cat "$0" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup-verl: installing torch==2.13.0 (CPU), verl==0.9.1, pytest"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  # torch first and pinned: verl would otherwise pull a multi-GB CUDA build.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q "verl==0.9.1" "torch==2.13.0" "pytest>=8"
  echo "$want" > "$stamp"
fi

# flowmap itself, as a wheel would install it (not -e): the verl tests then also
# prove that a regular install traces Ray workers and their children.
src_stamp=$VENV/.flowmap-sources
src="$( (cat pyproject.toml setup.py; find flowmap cli trainer -type f -not -name '*.pyc' \
        -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 cat) | sha256sum | cut -c1-16)"
if [ ! -f "$src_stamp" ] || [ "$(cat "$src_stamp")" != "$src" ]; then
  echo "setup-verl: installing flowmap (regular install) into $VENV"
  "$VENV/bin/python" -m pip uninstall -y -q flowmap >/dev/null 2>&1 || true  # the old name
  "$VENV/bin/python" -m pip install -q --no-deps --force-reinstall . 2>&1 \
    | grep -v -e '^WARNING: Location' || true
  "$VENV/bin/python" -m pip install -q . 2>&1 | grep -v -e '^WARNING: Location' || true
  echo "$src" > "$src_stamp"
fi
