#!/usr/bin/env bash
# Set up (idempotent, with the integration extras: TRL, Ray) and run the whole
# test suite: lint, type-check (the library strict, the trainer and the CLI as
# installed: pyproject.toml), then pytest. The verl tests run in
# their own venv (verl pins transformers<5.11), when scripts/setup-verl.sh made it
# and no pytest args narrow the run.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
FLOWMAP_EXTRAS=${FLOWMAP_EXTRAS:-dev,integrations} bash scripts/setup.sh
.venv/bin/python -m ruff check flowmap cli trainer tests examples bench scripts
.venv/bin/python -m mypy
if [ $# -eq 0 ] && [ -x .venv-verl/bin/python ]; then
  .venv-verl/bin/python -m pytest -q tests/integration/test_verl.py
fi
.venv/bin/python -m pytest -q "$@"
