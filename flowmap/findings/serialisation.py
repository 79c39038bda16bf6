"""Bytes moved across processes, by role-level seam and transport."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import SERIALISATION, Finding, RoleKey, per_step, role_key
from flowmap.model.format import seam_label
from flowmap.model.types import SeamKey

if TYPE_CHECKING:
    from flowmap.model.view import RunView

SERIALISED = ("pickle", "rpc", "shm", "collective")


def detect(view: RunView) -> list[Finding]:
    moved: dict[tuple[SeamKey, str], int] = defaultdict(int)
    for h in view.events.hops:
        if h.transport in SERIALISED:
            moved[((h.src, h.dst, h.name), h.transport)] += h.nbytes
    by_role: dict[tuple[RoleKey, str], int] = defaultdict(int)
    labels: dict[tuple[RoleKey, str], set[str]] = defaultdict(set)
    for (key, transport), nbytes in moved.items():
        by_role[(role_key(key), transport)] += nbytes
        labels[(role_key(key), transport)].add(seam_label(key))
    out = []
    for (rk, transport), nbytes in by_role.items():
        bps = nbytes / view.detail.num_steps
        out.append(Finding(SERIALISATION, sorted(labels[(rk, transport)]), bps,
                           _message(rk, transport, bps)))
    return out


def _message(rk: RoleKey, transport: str, bps: float) -> str:
    src, dst, name = rk
    route = f"between {src} instances" if src == dst else f"from {src} to {dst}"
    if transport in ("pickle", "rpc"):
        return (f"`{name}` is serialised ({transport}) {route}, {per_step(bps)}: move its tensors "
                "through shared memory or a handle and pickle only the metadata.")
    if transport == "shm":
        return (f"`{name}` crosses processes through shared memory {route}, {per_step(bps)}: "
                f"cheap per byte, so make sure only the leaves and rows {dst} reads are written.")
    return (f"`{name}` moves by collective {route}, {per_step(bps)}: bucket and overlap it with "
            "compute, or send only what changed.")
