"""A value returned to a middle process and passed on as another call's argument.

The Ray driver pattern: `batch = ray.get(rollout.generate.remote())`, then
`trainer.train.remote(batch)`. The bytes cross twice (rollout -> driver,
driver -> trainer) where one crossing would do. The two hops are recorded by
different processes — the driver records the result it fetched, the trainer
the argument it received — so they share no storage, and their leaves are
named differently (`result.*` for a return value, the parameter's name for an
argument). `pass_through` compares storages and leaf names; this compares
what the payload is made of: an arrival at the middle whose tensors (kind,
dtype, shape, bytes, whatever their paths; arrays, and bytes and strings of
256 bytes or more) all leave it again on a later hop to another owner is that
payload passed on.

Shapes and dtypes must match, so a received [8, 128] batch is never taken for
an unrelated [1024] tensor; `ref` hops (a handle, or a Python reference in one
process) moved no bytes and are neither arrivals nor departures — which is
also the fix's control: a driver that hands the ObjectRef on records a `ref`
arrival, and nothing is found. A seam counts only when most of its hops
carried an arrival on, so weights sent every step after arriving once (state)
do not. A departure through torch's shared memory (`shm` off Ray: a store the
consumer reads by handle) moves no bytes worth saving either; on a Ray node
`shm` is the object store, which copies the value in, and counts.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flowmap.findings.common import PASS_THROUGH, Finding, per_step, role_key
from flowmap.findings.pass_through import made_by_middle
from flowmap.model.types import ARRAY_KINDS, SeamKey
from flowmap.trace_format import GROUP

if TYPE_CHECKING:
    from flowmap.model.view import RunView
    from flowmap.read.events import Hop

KEEP = 64  # arrivals remembered per middle owner (oldest forgotten first)

Part = tuple[str, str, tuple[object, ...], int]  # (kind, dtype, shape, nbytes) of one tensor


@dataclass(slots=True)
class _Arrival:
    seam: SeamKey
    parts: Counter[Part]
    nbytes: int
    sent_on: set[SeamKey] = field(default_factory=set)
    # raw frames whose receiver named their content (`Hop.arrived`): sent on verbatim, they
    # would carry that id; frames that carry none hold new content (`pass_through`)
    named: bool = False


TEXT_KINDS = ("bytes", "str")
MIN_TEXT_BYTES = 256  # a shorter string is a name or a status, not a payload passed on


def _parts(h: Hop) -> Counter[Part]:
    return Counter((leaf.kind, leaf.dtype, tuple(leaf.shape), leaf.nbytes) for leaf in h.leaves
                   if (leaf.kind in ARRAY_KINDS and leaf.nbytes)
                   or (leaf.kind in TEXT_KINDS and leaf.nbytes >= MIN_TEXT_BYTES))


def funnels(view: RunView) -> dict[tuple[SeamKey, SeamKey], tuple[int, int]]:
    """`(seam in, seam out) -> (hops, bytes)` carried on through a middle owner."""
    waiting: dict[str, deque[_Arrival]] = defaultdict(lambda: deque(maxlen=KEEP))
    found: dict[tuple[SeamKey, SeamKey], list[int]] = defaultdict(lambda: [0, 0])
    on_ray = {p.pid for p in view.health.processes if p.ray_node}
    for h in view.events.hops:
        if h.transport == "ref" or not h.nbytes or h.src == h.dst:
            continue
        parts = _parts(h)
        if not parts:
            continue
        seam = (h.src, h.dst, h.name)
        # Read through torch's shared memory, a storage crosses as a handle (what a store is
        # for): no bytes to save by going direct. Ray's object store (`shm` on a Ray node)
        # copies the value in, so there it is a departure like any other.
        handle_read = h.transport == "shm" and h.pid not in on_ray
        for arrival in () if handle_read else waiting.get(h.src, ()):
            if arrival.seam[0] == h.dst or seam in arrival.sent_on or (arrival.named
                                                                      and not h.storages):
                continue
            if not arrival.parts - parts:  # every tensor that arrived leaves on this hop
                arrival.sent_on.add(seam)
                got = found[(arrival.seam, seam)]
                got[0] += 1
                got[1] += arrival.nbytes
                break
        if h.transport == "collective" and h.dst.startswith(GROUP):
            continue  # a rank's side of a collective: its group is the transfer, not a stage
        named = not h.storages and h.arrived is not None and bool(h.arrived[1])
        waiting[h.dst].append(_Arrival(seam, parts, sum(p[3] * n for p, n in parts.items()),
                                       named=named))
    # where storage identity followed the data into the middle's process, it decides: a
    # seam whose tensors the middle made (advantages shaped as the rewards) is no funnel
    made = made_by_middle(view)
    return {pair: (n, b) for pair, (n, b) in found.items()
            if pair[1] in view.seams and 2 * n >= view.seams[pair[1]].hops
            and role_key(pair[1]) not in made}


def detect(view: RunView) -> list[Finding]:
    """One pass-through finding per (arrival seam, departure seam) through a middle owner."""
    out = []
    for (a, b), (_, nbytes) in sorted(funnels(view).items()):
        middle = a[1]
        renamed = "" if a[2] == b[2] else f", arriving as `{a[2]}` and leaving as `{b[2]}`"
        bps = nbytes / view.detail.num_steps
        out.append(Finding(
            PASS_THROUGH, sorted({view.seams[a].label, view.seams[b].label}), bps,
            f"the payload {a[0]} returns to {middle} passes through {middle} unchanged "
            f"(the same tensors by shape and dtype{renamed}) on its way to {b[1]}: send it "
            f"{a[0]} -> {b[1]} directly (on Ray, pass the ObjectRef on instead of its value), "
            f"saving {per_step(bps)}.",
        ))
    return out
