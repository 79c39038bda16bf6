"""The pure parts of bench/bench_against.py: the preload's lines, the split by process,
the interval over rounds.

Nothing is run or timed here; these pin what the per-process figures are made of.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_against as ba  # noqa: E402

LINES = (
    "101\t7\t1.500000\t0.250000\t300000\tpython bench/_measure.py python examples/grpo_tiny.py\n"
    "102\t101\t3.000000\t0.500000\t290000\tpython -m flowmap trace -o run examples/grpo_tiny.py\n"
    "103\t102\t2.000000\t0.200000\t260000\tpython -c from multiprocessing.spawn import "
    "spawn_main; spawn_main(tracker_fd=15, pipe_handle=21) --multiprocessing-fork\n"
    "104\t102\t1.800000\t0.200000\t260000\tpython -c from multiprocessing.spawn import "
    "spawn_main; spawn_main(tracker_fd=15, pipe_handle=23) --multiprocessing-fork\n"
    "a torn line\n"
)


def test_the_measuring_parent_is_left_out_and_the_driver_is_the_root():
    rows = ba.parse_exit_rusage(LINES)
    assert [pid for pid, *_ in rows] == [102, 103, 104]
    by_role = ba.roles(rows, total_cpu_s=8.0)
    assert by_role["driver"] == 3.5
    assert by_role["rank"] == statistics.mean([2.2, 2.0])  # per rank
    # the rest of the tree: what no line accounts for (the resource tracker's _exit)
    assert abs(by_role["other"] - (8.0 - 3.5 - 4.2)) < 1e-9


def test_the_interval_holds_the_median_and_narrows_with_rounds():
    few = [0.01, -0.02, 0.03, 0.0, 0.02]
    lo, hi = ba.bootstrap_ci(few)
    assert lo <= statistics.median(few) <= hi
    many = few * 8
    lo8, hi8 = ba.bootstrap_ci(many)
    assert hi8 - lo8 < hi - lo
