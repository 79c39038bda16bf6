#!/usr/bin/env bash
# The device check (issue 40): flowmap on a CUDA GPU, in one go, in under 8 minutes on one GPU.
#
#   1. runs tests/gpu (pytest);
#   2. runs the trainer on CUDA with one rank (NCCL), untraced and traced, twice each,
#      interleaved, for the overhead;
#   3. traces it with two ranks: NCCL with two GPUs, gloo over CUDA tensors with one;
#   4. prints (scripts/device_figures.py): overhead traced vs untraced; recorded
#      all_reduce bytes vs parameter bytes; CUDA-IPC handle bytes vs the storage bytes
#      they open; the device bounces found.
#
# Usage: scripts/device_check.sh            (from anywhere; runs land in $DEVICE_CHECK_DIR)
# Environment: PYTHON [.venv/bin/python when present, else python3],
#              DEVICE_CHECK_DIR [a new temporary directory],
#              DEVICE_CHECK_STEPS [30] training steps per trainer run.
#              DEVICE_CHECK_DRY_RUN=1: the same steps on the CPU (--device cpu, no
#              tests/gpu), to check this script's own plumbing where there is no GPU;
#              its IPC figure fails, as the CPU trainer syncs weights through shared memory.
# Exit: 0 all figures within target, 1 a test or target failed, 2 no CUDA device here.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
DEVICE=cuda
if [ "${DEVICE_CHECK_DRY_RUN:-0}" = 1 ]; then
    DEVICE=cpu
elif ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() and torch.cuda.device_count() > 0 else 1)' 2>/dev/null; then
    echo "device_check: no CUDA device here (torch sees none); the device check needs one GPU."
    exit 2
fi
GPUS=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')
OUT=${DEVICE_CHECK_DIR:-$(mktemp -d -t flowmap-device-check-XXXXXX)}
mkdir -p "$OUT"
STEPS=${DEVICE_CHECK_STEPS:-30}
# Synchronous loop and a fixed seed: runs repeat, so traced and untraced compare like for like.
ARGS=(--device "$DEVICE" --steps "$STEPS" --seed 0 --no-progress --set train.synchronous=true
      --set warmup.clean_steps=20 --set warmup.noisy_steps=20)
FAILED=0
BUDGET_S=450  # seconds for everything but the figures (bash's SECONDS counts from the start)
if [ "$DEVICE" = cuda ]; then
    echo "device_check: $GPUS GPU(s): $("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0))'); torch $("$PYTHON" -c 'import torch; print(torch.__version__)'); runs in $OUT"
    echo "== 1. tests/gpu"
    timeout 200 "$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/gpu || FAILED=1
else
    echo "device_check: DRY RUN on the CPU (DEVICE_CHECK_DRY_RUN=1): no GPU figure below is real; runs in $OUT"
fi

# One trainer run; appends its wall seconds (the trainer's own "N steps in X s") to the named list.
run() {  # run LIST TRACE_DIR_OR_EMPTY EXTRA_ARGS...
    local list=$1 dir=$2; shift 2
    local log="$OUT/$list-$(date +%s%N).log" cmd
    if [ -n "$dir" ]; then
        cmd=("$PYTHON" -m flowmap trace -o "$dir" examples/grpo_tiny.py "${ARGS[@]}" "$@")
    else
        cmd=("$PYTHON" examples/grpo_tiny.py "${ARGS[@]}" "$@")
    fi
    local left=$((BUDGET_S - SECONDS))  # the whole check stays under 8 minutes
    if [ "$left" -lt 20 ]; then
        echo "FAIL: out of time before: ${cmd[*]}"; FAILED=1; return
    fi
    if ! timeout "$((left < 120 ? left : 120))" "${cmd[@]}" >"$log" 2>&1; then
        echo "FAIL: ${cmd[*]} (log: $log)"; tail -n 20 "$log"; FAILED=1; return
    fi
    local s
    s=$(sed -n 's/^grpo_tiny: .* steps in \([0-9.]*\) s .*/\1/p' "$log" | tail -n 1)
    printf -v "$list" '%s' "${!list:+${!list},}$s"
    echo "  $(grep '^grpo_tiny:' "$log" | tail -n 1)"
}

echo "== 2. the trainer on $DEVICE, one rank ($([ "$DEVICE" = cuda ] && echo NCCL || echo gloo)): untraced and traced, interleaved"
UNTRACED="" TRACED=""
run UNTRACED "" --dp 1
run TRACED "$OUT/one-rank-nccl" --dp 1
run UNTRACED "" --dp 1
run TRACED "$OUT/one-rank-nccl-2" --dp 1

if [ "$DEVICE" = cpu ]; then
    echo "== 3. two ranks on the CPU (gloo), traced"
    TWO="$OUT/two-ranks-gloo"
elif [ "$GPUS" -ge 2 ]; then
    echo "== 3. two ranks on two GPUs (NCCL), traced"
    TWO="$OUT/two-ranks-nccl"
else
    echo "== 3. two ranks on the one GPU (gloo over CUDA tensors), traced"
    TWO="$OUT/two-ranks-gloo"
fi
DP2=""
run DP2 "$TWO" --dp 2

echo "== 4. figures"
RUNS=()
for r in "$OUT/one-rank-nccl" "$TWO"; do [ -d "$r" ] && RUNS+=("$r"); done
if [ ${#RUNS[@]} -eq 0 ]; then
    echo "FAIL: no traced run to read"; exit 1
fi
"$PYTHON" scripts/device_figures.py --runs "${RUNS[@]}" --untraced "$UNTRACED" --traced "$TRACED" \
    --config "--steps $STEPS --seed 0" || FAILED=1
if [ "$FAILED" = 0 ]; then echo "device_check: all within target"; else echo "device_check: FAILED (see above)"; fi
exit "$FAILED"
