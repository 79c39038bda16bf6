"""Serialisation bloat: messages whose wire bytes are far above the payload's own bytes.

A transport that serialises (pickle through a queue or pipe, `send_pyobj` or
`send_json` on a ZMQ socket, an object collective such as
`broadcast_object_list`, whose bytes are the pickled size torch measured)
reports what crossed its channel; the payload's own bytes are its leaves' (an array's elements, a
listed number's 4 bytes (a float32 or int32 element), a string's length). Where the wire carries `MIN_RATIO` times
more, the difference is the cost of the encoding: many small tensors each
pickled with its storage header, numbers as JSON text, a list of Python
objects instead of one array. Whatever the array size: a 4-byte tensor pickled
into 400 bytes is the finding, a 400 MB array pickled into 400 MB is not (its
cost is the copy, which `view`, `duplicate` and `pass_through` price).

A Ray call's inline value (`rpc`, recorded by a process that said it is on a
Ray node) is no finding either: Ray sends a value inline only while it is small
(larger ones go through the object store, `flowmap.read.ray_transport`), and
there is no cheaper way to hand it over. Where such bytes are pickled twice for
nothing (fetched by the driver and sent on) the pass-through finding of
`driver_funnel` says so, with the bytes at stake.

*At stake*: wire bytes minus own bytes, per step, on the role-level seam.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import (
    SERIALISATION,
    Finding,
    RoleKey,
    per_step,
    receipts,
    role_key,
)
from flowmap.findings.duplicates import repeats_a_slot
from flowmap.model.format import fmt_bytes, seam_label
from flowmap.model.types import ARRAY_KINDS, SeamKey

if TYPE_CHECKING:
    from flowmap.model.view import RunView
    from flowmap.read.events import Hop

MIN_RATIO = 2.0
# Below this a message is its framing (a sentinel, an acknowledgement): no encoding to fix.
MIN_HOP_BYTES = 1024
NUMBERS = ("int", "float")
# what a list of numbers may hold: Python's, or numpy's scalars (`list(array)`), each pickled
# with its dtype; a numpy scalar's own bytes are its dtype's
LISTED = (*NUMBERS, "scalar")
# A listed Python number's own bytes: what it takes in the one array the fix sends (float32
# or int32; nothing a pipeline hands between stages needs double precision, see `heaviest`).
NUMBER_BYTES = 4


def detect(view: RunView) -> list[Finding]:
    own_of: dict[tuple[int, int], int | None] = {}  # a schema's leaves: one tuple per shard
    wire: dict[tuple[RoleKey, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    labels: dict[tuple[RoleKey, str], set[SeamKey]] = defaultdict(set)
    views = {(n.src, n.name) for sh in view.events.shards for n in sh.notes if n.storage_bytes}
    texts = _number_texts(view)
    on_ray = {p.pid for p in view.health.processes if p.ray_node}
    received = receipts(view)  # a rooted collective's message: priced at its root
    for h in view.events.hops:
        crossed = _wire(h)
        if crossed is None or (h.src, h.name) in views:  # a view's storage: `view` prices it
            continue
        if h.seam in received:
            continue
        if repeats_a_slot(h):  # the same object in several ranks' slots: `duplicate` prices it
            continue
        if h.transport == "rpc" and h.pid in on_ray:  # Ray's inline value: no cheaper way
            continue
        text = texts.get((h.src, h.name))  # one dict per sender and name: its own ratios
        cached = (id(h.leaves), id(text) if text is not None else 0)
        if cached not in own_of:
            own_of[cached] = _own(h, text)
        own = own_of[cached]
        if own is None:
            continue
        k = (role_key(h.seam), h.transport)
        w = wire[k]
        w[0] += crossed
        w[1] += own
        w[2] += 1
        w[3] += any(x.kind in ARRAY_KINDS for x in h.leaves)
        labels[k].add(h.seam)
    out = []
    for (rk, transport), (crossed, own, hops, with_arrays) in wire.items():
        if crossed / hops < MIN_HOP_BYTES or crossed < MIN_RATIO * max(own, 1):
            continue
        bps = (crossed - own) / view.detail.num_steps
        out.append(Finding(SERIALISATION, sorted(seam_label(k) for k in labels[(rk, transport)]),
                           bps, _message(rk, transport, crossed / max(own, 1), own / hops,
                                         bps, with_arrays > 0)))
    return out


def _number_texts(view: RunView) -> dict[tuple[str, str], dict[str, float]]:
    """(sender, payload name) -> path -> numbers a byte of that text leaf holds, where the
    transport found its frame to be numbers written as text (`number_text`): the most
    numbers a byte any message of it held."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for sh in view.events.shards:
        for n in sh.notes:
            if n.numbers and n.nbytes:
                paths = out[(n.src, n.name)]
                paths[n.path] = max(paths.get(n.path, 0.0), n.numbers / n.nbytes)
    return out


def _own(h: Hop, text: dict[str, float] | None = None) -> int | None:
    """The payload's own bytes, or None when it holds no numbers to encode better (a dict of
    a few scalars and strings: its keys are the encoding, and one array would not hold it).
    A text leaf of numbers (`text`: path -> numbers a byte) is as many 4-byte numbers."""
    if not text and not any(x.kind in ARRAY_KINDS or (x.kind in LISTED and "[*]" in x.path)
                            for x in h.leaves):
        return None
    own = 0
    for x in h.leaves:
        if x.kind == "ref":
            continue
        if x.kind in NUMBERS and "[*]" in x.path:
            own += x.nbytes * NUMBER_BYTES // 8
        elif text and x.kind in ("str", "bytes") and x.path in text:
            own += round(x.nbytes * text[x.path]) * NUMBER_BYTES
        else:
            own += x.nbytes
    return own


def _wire(h: Hop) -> int | None:
    """What crossed the channel for hop `h`, when its transport serialised it."""
    if h.wire_bytes is not None:
        return h.wire_bytes
    if h.transport == "collective":  # object collectives' bytes are the pickled size torch measured
        return h.nbytes if "object" in h.name else None
    return h.nbytes if h.transport == "pickle" else None


def _message(rk: RoleKey, transport: str, ratio: float, own: float, bps: float,
             arrays: bool) -> str:
    src, dst, name = rk
    route = f"between {src} instances" if src == dst else f"from {src} to {dst}"
    fix = ("stack the small tensors into one array (or a few) and send that"
           if arrays else "send the numbers as one array, not as Python objects or text")
    return (f"`{name}` crosses {route} ({transport}) as {ratio:.1f}× its own bytes "
            f"({fmt_bytes(own)} a message), {per_step(bps)} of encoding: {fix}.")
