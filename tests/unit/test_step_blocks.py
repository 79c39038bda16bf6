"""A live watch holds a long run's old steps in blocks: bounded records, the same figures.

GIVEN a run of many steps written out piece by piece (three processes, two of them
sending on one seam, sizes that change from step to step so that each seam's largest
step is one step's, kept hops at the start, and a step-less seam), WHEN a reader with
blocks of old steps polls along, THEN at every point every sum, least and largest value,
the step count and each seam's and the run's largest step equal those `flowmap.load`
reads from the same bytes, the step bins add up to the same bytes and steps, AND the
records it holds stop growing once the blocks are full. The same for a trace written
by `--aggregate`; and a process far behind the others keeps every sum exact, its
largest steps a lower bound.
"""

from __future__ import annotations

import os

import pytest
import runs
from growing import bins_add_up, exact_figures

import flowmap
from flowmap import trace_format as tf
from flowmap.model.run import Run
from flowmap.read.blocks import StepBlocks, _union
from flowmap.read.incremental import IncrementalReader

STEPS = 240
HORIZON, MAX_BLOCKS = 8, 4
DETAIL = 30


def _size(p: int, s: int, i: int) -> int:
    """Rows of a hop: each process's steps differ, and one step in 37 is much larger."""
    return 2 + (s * 7 + p * 3 + i) % 11 + (40 if (s + p) % 37 == 5 else 0)


def _write(path: str) -> dict[str, list[bytes]]:
    for p in range(3):
        w = runs.ShardWriter(os.path.join(path, f"h-{p + 1}-1{tf.SHARD_SUFFIX}"), p + 1)
        t = 1000 * p
        for s in range(STEPS):
            w.step(t, s)
            for i in range(4):
                t += 100
                src = "rollout" if p < 2 else "learner"  # two processes share a seam
                w.hop(t, src, "trainer", "batch", [runs.tensor("x", (_size(p, s, i), 4))],
                      step=s, transport="ref" if i % 2 else "pickle", items=[f"{p}-{s}-{i}"])
            w.hop(t + 10, "trainer", "log", "metrics", [runs.scalar("loss")])  # no step
        w.close(t + 1000)
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read().split(b"\n")
    return out


def test_blocks_keep_every_figure_a_full_read_has_as_a_run_grows(tmp_path):
    lines = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    blocks = StepBlocks(HORIZON, MAX_BLOCKS)
    reader = IncrementalReader(str(dst), detail_hops=DETAIL, blocks=blocks)
    points = 30
    held = []
    for k in range(1, points + 1):
        for name, ls in lines.items():
            upto = len(ls) * k // points
            with open(dst / name, "wb") as f:
                f.write(b"\n".join(ls[:upto]) + (b"\n" if upto else b"")
                        + (b"\0" * 4096 if k < points else b""))
        reader.poll()
        live = reader.records(Run)
        full = flowmap.load(str(dst), detail_hops=DETAIL)
        assert exact_figures(live) == exact_figures(full), k
        for n in (1, 6, 50):
            bins_add_up(live, n)
        held.append(len(live.seam_steps))
    assert blocks.blocks and blocks.width > 1  # blocks were made, and merged as they grew
    full = flowmap.load(str(dst), detail_hops=DETAIL)
    assert len(full.seam_steps) > 4 * held[-1]  # what a full read holds, and blocks do not
    # 6 records (seam, process, transport) per step or block, and without a step two per
    # process at most (its folded hops, and its kept ones the run folds past the run's
    # detail window): the horizon and the blocks bound what is held, however long the run
    assert len(blocks.blocks) <= MAX_BLOCKS
    assert max(held) <= 6 * (HORIZON + MAX_BLOCKS) + 2 * 3


def test_an_aggregated_trace_keeps_every_figure_in_blocks_too(tmp_path):
    # GIVEN a trace written by `--aggregate` (past its first step, `a` lines: one per seam,
    # step and transport, written as each step ends) of sizes that change by step
    src = tmp_path / "src"
    with flowmap.tracing(str(src), children=False, aggregate=1):
        for s in range(150):
            flowmap.step(s)
            for i in range(3):
                flowmap.hop("rollout/0", "trainer/0", {"x": b"x" * _size(0, s, i) * 16},
                            name="batch", step=s)
            flowmap.hop("trainer/0", "rollout/0", {"w": b"w" * (64 + s % 5)}, name="weights",
                        step=s, transport="copy")
    lines = {n: (src / n).read_bytes().split(b"\n") for n in os.listdir(src)
             if n.endswith(tf.SHARD_SUFFIX)}
    assert any(b'["a",' in line for ls in lines.values() for line in ls)
    dst = tmp_path / "live"
    dst.mkdir()
    (dst / tf.RUN_META).write_bytes((src / tf.RUN_META).read_bytes())
    blocks = StepBlocks(HORIZON, MAX_BLOCKS)
    reader = IncrementalReader(str(dst), detail_hops=DETAIL, blocks=blocks)
    # WHEN it is read as it grows, THEN every point reads as `load` reads it, in blocks
    for k in range(1, 11):
        for name, ls in lines.items():
            upto = len(ls) * k // 10
            (dst / name).write_bytes(b"\n".join(ls[:upto]) + b"\n")
        reader.poll()
        live = reader.records(Run)
        assert exact_figures(live) == exact_figures(flowmap.load(str(dst), detail_hops=DETAIL)), k
        bins_add_up(live, 7)
    assert len(blocks.blocks) > 1 and len(live.seam_steps) <= 2 * (HORIZON + MAX_BLOCKS) + 2


def test_a_lagging_process_keeps_sums_exact_and_largest_steps_a_lower_bound(tmp_path):
    lines = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    reader = IncrementalReader(str(dst), detail_hops=DETAIL, blocks=StepBlocks(HORIZON, 4))
    lag = list(lines)[2]  # the learner's process, far behind the others
    for k in range(1, 21):
        for name, ls in lines.items():
            upto = len(ls) * k // 20 if name != lag else len(ls) * k // 40
            with open(dst / name, "wb") as f:
                f.write(b"\n".join(ls[:upto]) + b"\n" + b"\0" * 4096)
        reader.poll()
        live, full = reader.records(Run), flowmap.load(str(dst), detail_hops=DETAIL)
        assert live.num_steps == full.num_steps
        for key, s in full.seams.items():
            got = live.seams[key]
            assert (got.hops, got.total_bytes, got.min_bytes, got.max_bytes, got.items) == \
                (s.hops, s.total_bytes, s.min_bytes, s.max_bytes, s.items), (k, key)
            assert got.bytes_per_step_max <= s.bytes_per_step_max
            assert got.hops_per_step_max <= s.hops_per_step_max


def test_step_ranges_join_when_they_touch():
    assert _union([(1, 3)], [(4, 6)]) == [(1, 6)]
    assert _union([(1, 3), (9, 9)], [(5, 6), (2, 4)]) == [(1, 6), (9, 9)]
    assert _union([], [(7, 8)]) == [(7, 8)]


def test_blocks_need_a_horizon_and_two_blocks():
    with pytest.raises(ValueError):
        StepBlocks(0, 4)
    with pytest.raises(ValueError):
        StepBlocks(8, 1)
