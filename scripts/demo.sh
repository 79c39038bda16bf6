#!/usr/bin/env bash
# Set up (idempotent), trace the built-in GRPO trainer, report, and write the HTML.
# Usage: bash scripts/demo.sh [trainer flags, e.g. --steps 20]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
run=flowmap-runs/grpo_tiny-demo
rm -rf "$run"
.venv/bin/flowmap trace -o "$run" examples/grpo_tiny.py "$@"
.venv/bin/flowmap report "$run"
.venv/bin/flowmap render "$run" --html "$run/flowmap.html"
echo "demo: open $run/flowmap.html in a browser (it works offline)"
