"""Payloads that enter a middle role and leave it unchanged.

Evidence, strongest first: the leaving hop's storages all arrived at that
role earlier (the very same tensors travel on: in the same process, or
unpickled from a transport message, whose receiver names the storages it got,
however it wraps them to send them on); or the
leaf schema in and out is the same once list folding (`[*]`) is ignored — names,
dtypes and shapes, so leaves called alike but shaped apart are no match — and
there were enough arrivals to feed the departures. Leaves repacked on the way
are followed separately (`leaf_chains`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowmap import trace_format as tf
from flowmap.findings import leaf_chains
from flowmap.findings.common import (
    PASS_THROUGH,
    Finding,
    RoleKey,
    norm_path,
    per_step,
    role_key,
    role_seams,
)
from flowmap.model.types import ARRAY_KINDS, Dim, LeafStats, SeamKey, SeamStats
from flowmap.read.events import storage_bases
from flowmap.trace_format import COLLECTIVE, RPC, SHM

if TYPE_CHECKING:
    from flowmap.model.view import RunView
    from flowmap.read.events import Hop


def detect(view: RunView) -> list[Finding]:
    groups = role_seams(view)
    matched, made_here = _storage_matches(view)
    signature = {k: _signature(v) for k, v in groups.items()}
    out = []
    middles: set[str] = set()
    for a, in_seams in groups.items():
        for b, out_seams in groups.items():
            middle = a[1]
            if b[0] != middle or a[0] == middle or b[1] == middle or a[0] == b[1] \
                    or is_channel(in_seams, out_seams):
                continue
            # bytes at stake are bytes moved: a `ref` hop handed over a Python reference
            if matched.get((a, b)):
                evidence = "same storage"
                bps = min(matched[(a, b)] / view.detail.num_steps, _bps(in_seams) + _bps(out_seams))
            elif signature[a] and signature[a] == signature[b] and b not in made_here \
                    and _fed_by(in_seams, out_seams) and _shapes_agree(in_seams, out_seams) \
                    and not is_store(out_seams) and not _sampled_frames(signature[a], in_seams) \
                    and not _control(signature[a], min(_bps(in_seams), _bps(out_seams))):
                evidence = "same leaf schema"
                bps = min(_bps(in_seams), _bps(out_seams))
            else:
                continue
            labels = sorted(s.label for s in in_seams + out_seams)
            middles.add(middle)
            out.append(Finding(
                PASS_THROUGH, labels, bps,
                f"`{a[2]}` passes through {middle} unchanged ({evidence}) on its way from "
                f"{a[0]} to {b[1]}: send it {a[0]} -> {b[1]} directly, or hand {middle} a "
                f"handle instead of {per_step(bps)}.",
            ))
    return out + leaf_chains.detect(view, middles)


def is_channel(in_seams: list[SeamStats], out_seams: list[SeamStats]) -> bool:
    """Whether the middle is a collective's group: the root's hop into it and the others'
    out of it are two halves of one transfer (`dist` records each rank's side), not a stage
    that received the payload and sent it on."""
    return all(set(s.transports) == {"collective"} for s in in_seams + out_seams)


def is_store(out_seams: list[SeamStats]) -> bool:
    """Whether everything leaving the middle leaves through shared memory.

    Its readers then map what it holds: it is where the data rests (a replay
    store, a shared-memory pool), reached by handle, which is what this finding
    would advise; the bytes moved once, on the way in.
    """
    return bool(out_seams) and all(set(s.transports) == {"shm"} for s in out_seams)


# Messages of no array, of fewer bytes a step than this, passed on unchanged: a handle to
# where the data rests (a shared-memory block's name, offset and rows), which is the fix
MIN_TEXT_RELAY_BYTES = 4096


def _control(signature: frozenset[tuple[str, str, str]], bps: float) -> bool:
    """Whether a payload that matches by schema alone is a few small control messages."""
    return bps < MIN_TEXT_RELAY_BYTES and not any(k in ARRAY_KINDS for _, k, _ in signature)


def _sampled_frames(signature: frozenset[tuple[str, str, str]], in_seams: list[SeamStats]) -> bool:
    """Whether the payload is raw frames (bytes alone) whose arrivals the tracer (most of
    them) sampled: a relay that sent them on verbatim would carry the ids they arrived as (`same
    storage`), so frames of the same sizes that carry none hold new content (a stage that
    normalises what it got and sends the result is no relay)."""
    return (all(kind == "bytes" for _, kind, _ in signature)
            and min(s.p50_bytes for s in in_seams) >= tf.RELAY_SAMPLE_BYTES)


def _fed_by(in_seams: list[SeamStats], out_seams: list[SeamStats]) -> bool:
    """Could every departure be an arrival sent on (fan-out allowed)?

    Weights that arrive once and then leave every step, updated in place, have
    the same schema in and out but are state, not a payload passing through.
    """
    hops_in = sum(s.hops for s in in_seams)
    hops_out = sum(s.hops for s in out_seams)
    return hops_out <= hops_in * len({s.dst for s in out_seams})


def _bps(seams: list[SeamStats]) -> float:
    """Bytes moved per step (not payload size: `ref` hops copy nothing)."""
    return sum(s.moved_bytes_per_step for s in seams)


def _signature(seams: list[SeamStats]) -> frozenset[tuple[str, str, str]]:
    """What a payload is made of, ignoring sizes and list folding; empty if it holds no bytes."""
    sig = frozenset(
        (norm_path(leaf.path), leaf.kind, leaf.dtype)
        for s in seams for leaf in s.leaves if leaf.total_bytes
    )
    return sig if any(k in ARRAY_KINDS or k in ("bytes", "str") for _, k, _ in sig) else frozenset()


def _shapes_agree(in_seams: list[SeamStats], out_seams: list[SeamStats]) -> bool:
    """Whether every leaf that leaves could be one that arrived by shape, not name alone.

    Leaves called alike are not the same payload when their shapes differ: a
    received [8, 128] batch is no [1024] tensor all-reduced later under the
    same name (and dtype). A dim that varied over hops agrees with any size in
    its range; a leaf whose rank varied agrees with any shape.
    """
    arrived: dict[tuple[str, str, str], list[LeafStats]] = defaultdict(list)
    for s in in_seams:
        for leaf in s.leaves:
            arrived[(norm_path(leaf.path), leaf.kind, leaf.dtype)].append(leaf)
    for s in out_seams:
        for leaf in s.leaves:
            came = arrived.get((norm_path(leaf.path), leaf.kind, leaf.dtype))
            if came is not None and not any(_same_shape(c, leaf) for c in came):
                return False
    return True


def _same_shape(a: LeafStats, b: LeafStats) -> bool:
    if a.ranks is not None or b.ranks is not None:
        return True  # a rank varied: shapes tell nothing
    if len(a.shape) != len(b.shape):
        return False
    return all(_span(x)[0] <= _span(y)[1] and _span(y)[0] <= _span(x)[1]
               for x, y in zip(a.shape, b.shape))


def _span(dim: Dim) -> tuple[int, int]:
    """A dim as (least, largest): an int is both; a varying dim is its (min, max)."""
    return dim if isinstance(dim, tuple) else (dim, dim)


@dataclass(slots=True)
class _Arrival:
    """A storage's arrival at a role: the role-level seam it came by, the seams it left by."""

    came_by: RoleKey
    left_by: set[tuple[SeamKey, int]] | None = None  # (seam, part of it sent) sent on
    shared: bool = False  # it came by a handle to shared memory (`_by_handle`)


def _storage_bytes(h: Hop) -> tuple[bool, list[tuple[int, int]]]:
    """Whether storages and tensor leaves line up; (storage, bytes) per storage of `h`: its
    leaf's where they line up, else an equal share (tensors folded in a list)."""
    tensors = [leaf.nbytes for leaf in h.leaves if leaf.kind in ARRAY_KINDS]
    if len(tensors) == len(h.storages):
        return True, list(zip(h.storages, tensors))
    share = h.nbytes // max(1, len(h.storages))
    return False, [(s, share) for s in h.storages]


def _by_handle(h: Hop) -> bool:
    """Whether `h` sent its tensors through torch's shared memory by a transport message
    (a multiprocessing queue or pipe: its pickled size is known), so what is already
    shared moves as a handle. Ray's object store is no such hop: a value put again is
    copied again."""
    return h.transport == SHM and h.wire_bytes is not None


# A Ray call's argument is recorded by the callee's process, whose storages are not the
# sender's: what the sender made cannot be told there
CALLEE_RECORDED = (RPC, COLLECTIVE)


def made_by_middle(view: RunView) -> set[RoleKey]:
    """Role-level seams most of whose hops carry tensors their sender made, as storage
    identity says (it had received tensors in that process, and these are none of them)."""
    return _storage_matches(view)[1]


def _storage_matches(view: RunView) -> tuple[dict[tuple[RoleKey, RoleKey], int], set[RoleKey]]:
    """Bytes of hops leaving a role whose storages all arrived at that role, by seam pair;
    and the outgoing seams most of whose hops carried tensors the role did not receive
    though it had received tensors in that process (identity says it made them: a stage
    that computes advantages shaped as the rewards it got is no relay, whatever the schema).

    An arrival is matched once per outgoing owner-level seam: a buffer that
    arrives once and then leaves every step (weights updated in place, keeping
    their address) is state, not a payload passing through — and a pair
    counts only when most hops of the outgoing seams match. Storage ids are
    per process: a transport hop arrives in the receiver's process under the
    receiver's ids (`Hop.arrived`), so a relay in another process matches too.
    """
    # (pid, role) -> storage id -> (its arrival, its bytes then, whether those are exact)
    arrived: dict[tuple[int, str], dict[int, tuple[_Arrival, int, bool]]] = defaultdict(dict)
    nbytes: dict[tuple[RoleKey, RoleKey], int] = defaultdict(int)
    nhops: dict[tuple[RoleKey, RoleKey], int] = defaultdict(int)
    made: dict[RoleKey, int] = defaultdict(int)  # hops out of a role with tensors it made
    role_keys = {k: role_key(k) for k in view.seams}
    bases = storage_bases(view.events.shards)  # a row of what arrived is what arrived
    for h in view.events.hops:
        if not h.storages:
            if h.arrived is not None and h.arrived[1]:  # raw frames, named by their receiver
                key = role_keys[(h.src, h.dst, h.name)]
                share = h.nbytes // len(h.arrived[1])
                arrival = _Arrival(key, None, False)
                arrived[(h.arrived[0], key[1])].update(
                    (sid, (arrival, share, False)) for sid in h.arrived[1])
            continue
        seam = (h.src, h.dst, h.name)
        key = role_keys[seam]
        here = arrived.get((h.pid, key[0]))
        if here:
            # every storage arrived (a stage that adds leaves made something: not a relay),
            # by the seam it came by; bytes as the hop that brought it counted them
            # (came by) -> arrived storage -> [its arrival, bytes sent on, its bytes then,
            # the parts of it sent]
            came: dict[RoleKey, dict[int, list[Any]]] = defaultdict(dict)
            aligned, leaving = _storage_bytes(h)
            for part, b in leaving:
                sid, got = part, here.get(part)
                if got is None and (h.pid, part) in bases:
                    sid = bases[(h.pid, part)]  # a view of what arrived (a row sent on)
                    got = here.get(sid)
                if got is None:
                    came.clear()
                    if h.transport not in CALLEE_RECORDED:
                        made[key] += 1  # data of its own: identity says it was made here
                    break
                r, b_in, exact = got
                # a part already sent on this seam is state, not a payload passing through;
                # another part of it (a batch cut into micro-batches, hop by hop) is not
                if r.left_by is None or (seam, part) not in r.left_by:
                    sent = came[r.came_by].setdefault(sid, [r, 0, b_in, set()])
                    if not (r.shared and _by_handle(h)):  # else a handle: nothing copied
                        sent[1] += b if aligned or not exact else b_in
                    sent[3].add(part)
            for came_by, by_storage in came.items():
                pair = (came_by, key)
                # an arrived storage is sent on at most whole, however many rows of it leave
                nbytes[pair] += sum(min(b, b_in) for _, b, b_in, _ in by_storage.values())
                nhops[pair] += 1
                for r, _, _, parts in by_storage.values():
                    if r.left_by is None:
                        r.left_by = set()
                    r.left_by.update((seam, p) for p in parts)
        arrival = _Arrival(key, None, _by_handle(h))  # one record per arrival
        aligned, sizes = _storage_bytes(h)
        arrived[(h.pid, key[1])].update((sid, (arrival, b, aligned)) for sid, b in sizes)
        if h.arrived is not None and len(h.arrived[1]) == len(sizes):
            # received in another process: its ids of the same tensors, in the same order
            arrived[(h.arrived[0], key[1])].update(
                (sid, (arrival, b, aligned)) for sid, (_, b) in zip(h.arrived[1], sizes))
    hops_out: dict[RoleKey, int] = defaultdict(int)
    for k, st in view.seams.items():
        hops_out[role_keys[k]] += st.hops
    matched = {pair: n for pair, n in nbytes.items() if 2 * nhops[pair] >= hops_out[pair[1]]}
    return matched, {k for k, n in made.items() if 2 * n >= hops_out[k]}
