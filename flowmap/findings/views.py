"""A view that carries its whole storage across processes.

Pickling `t[:1]`, or putting it in a `torch.multiprocessing` queue, moves the
whole storage behind it, not the row (pytorch/pytorch #182105, #65604: a
one-row view of a 4 MB tensor writes about 4 MB). The schema records the
view's bytes; the tracer notes the storage's (`untyped_storage().nbytes()`, a
metadata read) on hops that move bytes (event `n`, flowmap/capture/leaf_notes.py).
*At stake*: storage bytes minus view bytes, per step, on transports that move
the storage (`pickle`, `shm`, `rpc`, `zmq`). Through shared memory a storage moves
once however many of its views are sent: where the views of one leaf a process sent
that step (the same storage size) hold at least half of it, the storage is data that
was sent (a batch's chunks, one to each rank: a `.clone()` each would move as much),
and they are no finding.
The fix is one call: send `t[:1].clone()`, so only the row travels.

Notes are written hop by hop, under `--aggregate` in the detail window only,
so the figure is per step of that window; under `--project` it scales with the
projection of the view's leaf on its seam.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from flowmap.findings.common import (
    STORAGE_TRANSPORTS,
    VIEW,
    Finding,
    RoleKey,
    per_step,
    role_key,
)
from flowmap.model.format import fmt_bytes, role_label
from flowmap.model.types import SeamKey
from flowmap.read.halves import UNTRACED
from flowmap.trace_format import SHM

if TYPE_CHECKING:
    from flowmap.model.view import RunView
    from flowmap.read.events import Hop, LeafNote

MIN_STORAGE_RATIO = 2.0  # a storage at least twice its view: less is alignment, not a bug


def detect(view: RunView) -> list[Finding]:
    notes = [n for sh in view.events.shards for n in sh.notes
             if n.storage_bytes and n.transport in STORAGE_TRANSPORTS
             and n.storage_bytes >= MIN_STORAGE_RATIO * max(1, n.nbytes)]
    notes = _shared_once(notes, view.events.hops)
    if not notes:
        return []
    # role-level seam -> [view bytes, storage bytes, notes]; its leaves, in order met
    found: dict[RoleKey, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    paths: dict[RoleKey, dict[str, None]] = defaultdict(dict)
    labels: dict[RoleKey, set[str]] = defaultdict(set)
    for n in notes:
        key = _seam_of(view, n)
        if key is None:
            continue
        scale = _scale(view, key, n)
        rk = role_key(key)
        entry = found[rk]
        entry[0] += n.nbytes * scale
        entry[1] += (n.storage_bytes or 0) * scale
        entry[2] += 1
        paths[rk][n.path] = None
        labels[rk].add(view.seams[key].label)
    out = []
    for rk, (view_bytes, storage_bytes, count) in found.items():
        bps = (storage_bytes - view_bytes) / view.detail.num_steps
        out.append(Finding(
            VIEW, sorted(labels[rk]), bps,
            f"`{role_label(rk)}` sends {_leaves(rk, list(paths[rk]))}: "
            f"{fmt_bytes(storage_bytes / count)} of storage travels for "
            f"{fmt_bytes(view_bytes / count)} of data"
            f"{' (a view, on average)' if len(paths[rk]) > 1 else ''}, "
            f"{per_step(bps)} for nothing: send a copy of the slice (`.clone()`), not the view.",
        ))
    return out


def _shared_once(notes: list[LeafNote], hops: Sequence[Hop]) -> list[LeafNote]:
    """The notes less those of views sent through shared memory whose storage the same
    process's views of that leaf, that step, hold at least half of (`MIN_STORAGE_RATIO`):
    the storage moved once, for data that was sent. The views are counted from the notes,
    and from the hops where those say more: a note is taken only as a view is put while
    its storage is not shared yet, and the chunks put to several queues at once race the
    feeder thread that moves it."""
    sent: dict[tuple[object, ...], int] = defaultdict(int)
    for n in notes:
        if n.transport == SHM:
            sent[(n.pid, n.src, n.name, n.path, n.step, n.storage_bytes)] += n.nbytes
    if not sent:
        return notes
    wanted = {key[:5] for key in sent}
    views: dict[tuple[object, ...], int] = defaultdict(int)  # (pid, src, name, path, step)
    for h in hops:
        if h.transport == SHM:
            for leaf in h.leaves:
                key = (h.pid, h.src, h.name, leaf.path, h.step)
                if key in wanted:
                    views[key] += leaf.nbytes
    return [n for n in notes if n.transport != SHM
            or MIN_STORAGE_RATIO * max(sent[(n.pid, n.src, n.name, n.path, n.step,
                                             n.storage_bytes)],
                                       views[(n.pid, n.src, n.name, n.path, n.step)])
            < (n.storage_bytes or 0)]


def _leaves(rk: RoleKey, paths: list[str]) -> str:
    """`input_ids` of `batch` as a view; `a`, `b` of `batch` as views (every leaf sent so)."""
    named = [p for p in paths if p and p != rk[2]]
    if not named:
        return f"`{rk[2]}` as a view"
    shown = ", ".join(f"`{p}`" for p in named[:4]) + (
        f" and {len(named) - 4} more" if len(named) > 4 else "")
    return f"{shown} of `{rk[2]}` as {'a view' if len(named) == 1 else 'views'}"


def _seam_of(view: RunView, n: LeafNote) -> SeamKey | None:
    """The seam the note's hop crossed: exact, or for a send half by sender and name."""
    key = (n.src, n.dst, n.name)
    if key in view.seams:
        return key
    if n.dst != UNTRACED:
        return None
    return next((k for k in view.seams if k[0] == n.src and k[2] == n.name), None)


def _scale(view: RunView, key: SeamKey, n: LeafNote) -> float:
    """Projected over traced bytes of the view's leaf on its seam (1 unless projected)."""
    if view.projection is None or not n.nbytes:
        return 1.0
    leaf = next((leaf for leaf in view.seams[key].leaves if leaf.path == n.path), None)
    return leaf.mean_bytes / n.nbytes if leaf is not None and leaf.hops else 1.0
