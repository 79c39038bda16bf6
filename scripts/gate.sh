#!/usr/bin/env bash
# flowmap gates itself: trace a short run of the built-in trainer and check its seams
# against the committed baseline and budget (docs/ci.md, "flowmap's own gate").
#
# Usage: scripts/gate.sh [--record] [CHECK_OPTIONS...]
#   --record       record the baseline from a fresh run instead of checking
#   CHECK_OPTIONS  passed to `flowmap check`, e.g. --format github, --tolerance 30%
# Environment (defaults in brackets):
#   FLOWMAP_GATE_RUN           run directory, replaced each time [flowmap-runs/gate]
#   FLOWMAP_GATE_BASELINE      [ci/flowmap-baseline.json]
#   FLOWMAP_GATE_BUDGET        [ci/flowmap-budget.yaml]
#   FLOWMAP_GATE_TRAINER_ARGS  extra trainer flags, appended (the tests grow the batch with it)
#   PYTHON                     [.venv/bin/python when present, else python3]
# Exit: 0 within limits, 1 on a regression or broken budget, 2 on a usage/config error.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
RUN=${FLOWMAP_GATE_RUN:-flowmap-runs/gate}
BASELINE=${FLOWMAP_GATE_BASELINE:-ci/flowmap-baseline.json}
BUDGET=${FLOWMAP_GATE_BUDGET:-ci/flowmap-budget.yaml}
# The recorded run: fixed seed and step count, and the synchronous loop (a step's
# rollout waits for the previous update), so the run repeats byte for byte and the
# gate cannot flake on timing; bytes per step compare like for like.
# Changing these means re-recording the baseline (scripts/gate.sh --record).
TRAINER_ARGS=(--steps 4 --seed 0 --no-progress --set train.synchronous=true)
# shellcheck disable=SC2206  # word splitting of the extra flags is intended
EXTRA=(${FLOWMAP_GATE_TRAINER_ARGS:-})
# The batch path varies by at most 5 % run to run; seams whose volume follows the
# async loop's timing get their own, wider tolerance in the budget file.
TOLERANCE=15%

RECORD=0
if [ "${1:-}" = "--record" ]; then RECORD=1; shift; fi

rm -rf "$RUN"
"$PYTHON" -m flowmap trace -o "$RUN" examples/grpo_tiny.py "${TRAINER_ARGS[@]}" "${EXTRA[@]}" >/dev/null

if [ "$RECORD" = 1 ]; then
    exec "$PYTHON" -m flowmap baseline "$RUN" -o "$BASELINE"
fi
exec "$PYTHON" -m flowmap check "$RUN" --baseline "$BASELINE" --budget "$BUDGET" \
    --tolerance "$TOLERANCE" "$@"
