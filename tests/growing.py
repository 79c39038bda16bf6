"""Write a finished run out again piece by piece, comparing the incremental reader with `load`.

Tests import this as `growing` (tests/ is on sys.path through its conftest).
"""

from __future__ import annotations

import os
import random

import flowmap
from flowmap import trace_format as tf
from flowmap.model.run import Run
from flowmap.read.incremental import IncrementalReader
from flowmap.reporters.json_document import report_document
from flowmap.strict_json import dumps


def _doc(run: flowmap.Run) -> str:
    return dumps(report_document(run.view), sort_keys=True)


def _shards(src: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(src)):
        if name.endswith(tf.SHARD_SUFFIX):
            with open(os.path.join(src, name), "rb") as f:
                out[name] = f.read()
    return out


def _grow(src: str, dst: str, points: int, seed: int, detail_hops: int | None) -> int:
    """Write `src`'s shards into `dst` in `points` pieces, comparing after each; returns the
    number of comparisons made."""
    rng = random.Random(seed)
    data = _shards(src)
    names = list(data)
    late = names[-1] if len(names) > 1 else None  # a later process: its shard appears half-way
    os.makedirs(dst)
    with open(os.path.join(src, tf.RUN_META), "rb") as f:
        meta = f.read()
    with open(os.path.join(dst, tf.RUN_META), "wb") as f:
        f.write(meta)
    reader = IncrementalReader(dst, detail_hops=detail_hops)
    done = dict.fromkeys(names, 0)
    compared = 0
    for k in range(1, points + 1):
        for name in names:
            if name == late and k <= points // 2:
                continue
            n = len(data[name])
            header = data[name].index(b"\n") + 1  # a process writes its header as it starts
            cut = n if k == points else max(done[name], header,
                                            min(n, rng.randint(0, n * k // points + 1)))
            done[name] = cut
            # a mapped shard: the written prefix, then zeros (its reserved, unwritten tail)
            with open(os.path.join(dst, name), "wb") as f:
                f.write(data[name][:cut] + b"\0" * (0 if k == points else 4096))
        reader.poll()
        if any(os.path.exists(os.path.join(dst, n)) and b"\n" not in data[n][:done[n]]
               for n in names):
            continue  # a header still being written: the finished reader would skip the file
        assert _doc(reader.records(Run)) == _doc(flowmap.load(dst, detail_hops=detail_hops)), k
        compared += 1
    return compared


def exact_figures(run: Run) -> tuple[object, ...]:
    """What a watch's blocks and settled halves keep exactly: per seam, per owner and for
    the run (`flowmap.read.blocks`, `flowmap.read.settle`)."""
    view = run.view
    seams = {k: (s.hops, s.total_bytes, s.min_bytes, s.max_bytes, s.items, s.transports,
                 s.bytes_per_step_max, s.hops_per_step_max, s.bytes_per_step_mean,
                 s.first_t_ns, s.last_t_ns) for k, s in run.seams.items()}
    owners = {k: (o.bytes_in, o.bytes_out, o.hops_in, o.hops_out, o.pids)
              for k, o in run.owners.items()}
    t = view.totals
    return (seams, owners, run.num_hops, run.num_steps, view.step_count, run.steps[0],
            t.total_bytes, t.bytes_per_step_max, t.max_hop_bytes, t.bytes_per_step_mean)


def bins_add_up(run: Run, n: int) -> None:
    bins = run.view.step_bins(n)
    assert sum(b.num_steps for b in bins.bins) == run.num_steps
    for key, s in run.seams.items():
        assert sum(bins.bytes[key]) == s.total_bytes
        assert sum(bins.hops[key]) == s.hops
    lasts = [b.last_step for b in bins.bins if b.last_step is not None]
    assert lasts == sorted(lasts) and lasts[-1] == run.steps[-1]
