#!/usr/bin/env bash
# Set up (idempotent, with the integration extras: TRL, Ray) and run the whole
# test suite: lint, type-check the library, then pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
FLOWMAP_EXTRAS=${FLOWMAP_EXTRAS:-dev,integrations} bash scripts/setup.sh
.venv/bin/python -m ruff check flowmap cli trainer tests examples bench scripts
.venv/bin/python -m mypy
.venv/bin/python -m pytest -q "$@"
