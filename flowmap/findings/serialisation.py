"""Arrays pickled across processes, by role-level seam and transport.

Only `pickle` and `rpc` hops that carry arrays, at least `MIN_HOP_BYTES` a hop
on average, are a finding: below the fixed cost of a message (the price
`chatty` puts on one), pickling is not what a transfer pays for: their tensors could move through shared memory or a
handle with only the metadata pickled. Shared memory and collectives already
move raw bytes (what they carry is another finding's business: `duplicate`,
`view`, `padding`, `chatty`), and a few bytes of pickled control messages
(`None` sentinels, acknowledgements) are no serialisation cost worth a line.

A Ray call's inline value (`rpc`, recorded by a process that said it is on a
Ray node) is no finding either: Ray sends a value inline only while it is small
(larger ones go through the object store, `flowmap.read.ray_transport`), and
there is no cheaper way to hand it over. Where such bytes are pickled twice for
nothing — fetched by the driver and sent on — the pass-through finding of
`driver_funnel` says so, with the bytes at stake.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.chatty import MESSAGE_COST_BYTES
from flowmap.findings.common import SERIALISATION, Finding, RoleKey, per_step, role_key
from flowmap.model.format import seam_label
from flowmap.model.types import ARRAY_KINDS, SeamKey

if TYPE_CHECKING:
    from flowmap.model.view import RunView

SERIALISED = ("pickle", "rpc")
MIN_HOP_BYTES = MESSAGE_COST_BYTES


def detect(view: RunView) -> list[Finding]:
    moved: dict[tuple[SeamKey, str], list[int]] = defaultdict(lambda: [0, 0])
    on_ray = {p.pid for p in view.health.processes if p.ray_node}
    for h in view.events.hops:
        if h.transport == "rpc" and h.pid in on_ray:
            continue
        if h.transport in SERIALISED and any(leaf.kind in ARRAY_KINDS for leaf in h.leaves):
            m = moved[((h.src, h.dst, h.name), h.transport)]
            m[0] += h.nbytes
            m[1] += 1
    by_role: dict[tuple[RoleKey, str], list[int]] = defaultdict(lambda: [0, 0])
    labels: dict[tuple[RoleKey, str], set[str]] = defaultdict(set)
    for (key, transport), (nbytes, hops) in moved.items():
        r = by_role[(role_key(key), transport)]
        r[0] += nbytes
        r[1] += hops
        labels[(role_key(key), transport)].add(seam_label(key))
    out = []
    for (rk, transport), (nbytes, hops) in by_role.items():
        if nbytes / hops < MIN_HOP_BYTES:
            continue
        bps = nbytes / view.detail.num_steps
        out.append(Finding(SERIALISATION, sorted(labels[(rk, transport)]), bps,
                           _message(rk, transport, bps)))
    return out


def _message(rk: RoleKey, transport: str, bps: float) -> str:
    src, dst, name = rk
    route = f"between {src} instances" if src == dst else f"from {src} to {dst}"
    return (f"`{name}` is serialised ({transport}) {route} with its arrays, {per_step(bps)}: move "
            "the arrays through shared memory or a handle and pickle only the metadata.")
