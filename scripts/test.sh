#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite: lint, then pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check flowmap cli trainer tests examples bench scripts
.venv/bin/python -m pytest -q "$@"
