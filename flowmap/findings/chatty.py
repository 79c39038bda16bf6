"""Chatty seams: one logical transfer sent as many small messages per step.

Weight sync as one message per parameter (allenai/open-instruct #1535: ~200 Ray
calls per sync, >120 s where NCCL itself took 0.5 s; huggingface/trl #5249)
pays a fixed cost per message — a call, a launch, a handshake — that bucketing
removes. The figure is messages per step on one seam; the ranking prices each
message the bucketed transfer would not need at `MESSAGE_COST_BYTES` (64 KiB),
the bytes one message's fixed cost could have moved (about 10 µs of a call or a
round trip at 6 GB/s; far more through Ray or HTTP), so a chatty seam sorts
among the byte findings.

A seam is chatty when, over the run's steps, its hops that moved bytes (not
`ref`) number at least `MIN_MESSAGES` a step, each smaller on average than
`BUCKET_BYTES`, and are one transfer cut into pieces: every step sends the
same set of messages (the same leaves, shapes and dtypes), of at least two
different kinds (a model's parameters are not all alike). Messages that are the
pipeline's own unit (a trajectory or a GRPO group each) are not: their shapes
follow the lengths generated and change from step to step, or they are all alike,
or each leaf differs from message to message in one dimension only (its length:
a toy sampler's lengths may repeat every step), unless the lengths are a model's:
raw bytes (`tobytes()`, ZMQ frames) or flattened arrays have only a length, so
pieces sent so read as a few sizes, each repeated within a step (layer by layer),
from a matrix's to a vector's (`MIN_SPAN` apart), where one unit per message reads
as about one length per message. Messages that carry item ids are not chatty either,
nor requests the receiver answers with data (turns of a conversation: each waits for
the reply before it, so none can be bucketed), and a length header sent before each
unit (a `[1]` tensor through `dist.send`, which cannot carry a shape) is no piece and
no message, nor a reply. A
stream of messages that each hold single values only (a token's id, position and
log-prob) is one element a message, no unit of the pipeline: chatty, however many a
step.
A rooted collective's messages are counted at its root (`receipts`): the ranks'
receipts are the same messages. The bucketed transfer needs
`ceil(bytes per step / BUCKET_BYTES)` messages.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from flowmap.findings.common import CHATTY, Finding, RoleKey, receipts, role_key
from flowmap.model.format import fmt_bytes, role_label
from flowmap.model.types import SeamStats

if TYPE_CHECKING:
    from flowmap.model.view import RunView

MIN_MESSAGES = 16
BUCKET_BYTES = 512 << 20
MESSAGE_COST_BYTES = 64 << 10
MIN_SPAN = 8  # a model's pieces by length alone: its largest this many times its smallest
HEADER_ELEMENTS = 2  # a message of one leaf this small says the next one's length
SHAPE_HEADER_ELEMENTS = 8  # or its shape (Megatron's p2p sends 3), where each has its unit
ANSWER_BYTES = 256  # replies this large on average carry data (a turn's tokens), not an ack


def detect(view: RunView) -> list[Finding]:
    if not view.steps:  # without steps there is no "per step" to count messages in
        return []
    groups: dict[RoleKey, list[SeamStats]] = defaultdict(list)
    candidates = set()
    received = receipts(view)  # a rooted collective's messages: counted at its root
    for key, s in view.seams.items():
        if key in received:
            continue
        moved_hops = s.hops - s.transports.get("ref", 0)
        if moved_hops and not s.items and moved_hops / view.num_steps >= MIN_MESSAGES \
                and not _answered(view, s, moved_hops):
            candidates.add(key)
    cut, headers = _cut_transfers(view, candidates)
    for key in candidates:
        s = view.seams[key]
        pieces = s.hops - s.transports.get("ref", 0) - headers[key]
        if key in cut and pieces / view.num_steps >= MIN_MESSAGES \
                and not _answered(view, s, pieces, headers):
            groups[role_key(key)].append(s)
    out = []
    for rk, seams in groups.items():
        found = [_chatty(view, s, headers[s.key]) for s in seams]
        chatty = [(s, f) for s, f in zip(seams, found) if f is not None]
        if not chatty:
            continue
        messages = sum(f[0] for _, f in chatty) / len(chatty)
        needed = sum(f[1] for _, f in chatty) / len(chatty)
        mean_bytes = sum(f[2] for _, f in chatty) / len(chatty)
        spared = sum(f[0] - f[1] for _, f in chatty)
        out.append(Finding(
            CHATTY, sorted(s.label for s, _ in chatty), spared * MESSAGE_COST_BYTES,
            f"`{role_label(rk)}` sends {messages:,.0f} messages per step"
            f"{' on each seam' if len(chatty) > 1 else ''} (about {fmt_bytes(mean_bytes)} each): "
            f"bucket them into {needed:,.0f} per step (ranked at "
            f"{fmt_bytes(MESSAGE_COST_BYTES)} per message spared).",
        ))
    return out


def _answered(view: RunView, s: SeamStats, moved_hops: int,
              headers: Counter[Any] | None = None) -> bool:
    """Whether the receiver answers the seam's messages with data: replies at least half
    as often, carrying more bytes than the requests, or `ANSWER_BYTES` each (an engine
    that returns each turn's tokens), not acknowledgements (a `ray.get` of `None` per
    parameter). Length headers are neither requests nor replies."""
    back = [r for r in view.seams.values() if r.src == s.dst and r.dst == s.src]
    told: Counter[Any] = headers if headers is not None else Counter()
    replies = sum(r.hops - r.transports.get("ref", 0) - told[r.key] for r in back)
    if not replies or 2 * replies < moved_hops:
        return False
    answer = sum(r.moved_bytes_per_step for r in back)
    return answer > s.moved_bytes_per_step or answer * view.num_steps >= ANSWER_BYTES * replies


def _cut_transfers(view: RunView, keys: set[Any]) -> tuple[set[Any], Counter[Any]]:
    """The seams of `keys` whose every step sends the same mixed set of message kinds; and
    the length headers each seam, and each seam back, sent (`_header`)."""
    headers: Counter[Any] = Counter()
    if not keys:
        return set(), headers
    back = {(dst, src) for src, dst, _ in keys}
    per_step: dict[Any, dict[Any, Counter[Any]]] = defaultdict(lambda: defaultdict(Counter))
    kinds: dict[int, Any] = {}  # a schema's leaves are one shared tuple per shard
    sizes: dict[Any, int] = {}  # each kind's bytes (its largest message)
    hops = []
    shapes: Counter[Any] = Counter()  # shape headers less the other messages, each seam
    for h in view.events.hops:
        key = (h.src, h.dst, h.name)
        if h.transport == "ref" or (key not in keys and (h.src, h.dst) not in back):
            continue
        kind = kinds.get(id(h.leaves))
        if kind is None:
            kind = kinds[id(h.leaves)] = tuple((x.path, tuple(x.shape), x.dtype) for x in h.leaves)
        hops.append((h, key, kind))
        if not _header(kind):
            shapes[key] += 1 if _header(kind, SHAPE_HEADER_ELEMENTS) else -1
    for h, key, kind in hops:
        if _header(kind) or (shapes[key] <= 0 and _header(kind, SHAPE_HEADER_ELEMENTS)):
            headers[key] += 1
            continue
        if key not in keys:
            continue
        per_step[key][h.step][kind] += 1
        sizes[kind] = max(sizes.get(kind, 0), h.nbytes)
    out = set()
    for key, steps in per_step.items():
        sets = [frozenset(c.items()) for step, c in steps.items() if step is not None]
        if not sets:
            continue
        if all(_scalars(kind) for c in steps.values() for kind in c):
            out.add(key)  # one token, one score a message: no unit of the pipeline
            continue
        common, n = Counter(sets).most_common(1)[0]
        # the first or last step may be cut short by the program's start or end
        if (len(sets) == 1 or n >= max(2, len(sets) - 1)) and _mixed(dict(common), sizes):
            out.add(key)
    return out, headers


def _scalars(kind: tuple[tuple[str, tuple[int, ...], str], ...]) -> bool:
    """Whether a message of this kind holds single values only (a token's id, position and
    log-prob; a sample's score): streamed one element a message, however many a step."""
    return bool(kind) and all(shape == () for _, shape, _ in kind)


def _header(kind: tuple[tuple[str, tuple[int, ...], str], ...],
            elements: int = HEADER_ELEMENTS) -> bool:
    """Whether a message of this kind is a length header: one integer or two, in a tensor
    (the shape a `dist.send` of the next message's length has), not a piece of data. With
    `elements`, a shape header of up to that many, counted so only on a seam that sends
    at least as many other messages (each header ahead of its unit)."""
    return len(kind) == 1 and "int" in kind[0][2] and len(kind[0][1]) <= 1 \
        and math.prod(kind[0][1]) <= elements


def _mixed(counts: dict[Any, int], sizes: dict[Any, int]) -> bool:
    """Whether the message kinds of a step (kind -> messages) are unlike pieces (a model's
    parameters), not one unit whose length varies (the same leaves, each one dimension
    longer or shorter: sequences, a group's prompt `[P]` and its responses `[G, R]`)."""
    kinds = list(counts)
    if len(kinds) < 2:
        return False
    if _layered(counts, sizes):
        return True
    structure = {tuple((path, dtype, len(shape)) for path, shape, dtype in k) for k in kinds}
    if len(structure) > 1:
        return True
    varying: set[tuple[int, int]] = set()  # (leaf, axis) whose size differs between kinds
    first = kinds[0]
    for k in kinds[1:]:
        for i, ((_, a, _), (_, b, _)) in enumerate(zip(first, k)):
            for j, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    varying.add((i, j))
    axes = Counter(i for i, _ in varying)
    return any(n > 1 for n in axes.values())  # one leaf shaped unlike in two dims: weights


def _layered(counts: dict[Any, int], sizes: dict[Any, int]) -> bool:
    """Whether a step's messages are a few sizes, each sent again and again, from a matrix's
    to a vector's: a model's layers, cut per parameter (known by length alone)."""
    span = [sizes[k] for k in counts]
    return (len(counts) >= 3 and sum(counts.values()) >= 2 * len(counts)
            and min(span) > 0 and max(span) >= MIN_SPAN * min(span))


def _chatty(view: RunView, s: SeamStats, headers: int) -> tuple[float, int, float] | None:
    """(messages per step, messages the bucketed transfer needs, bytes per message) or None;
    length headers are not counted."""
    moved_hops = s.hops - s.transports.get("ref", 0) - headers
    messages = moved_hops / view.num_steps
    bytes_per_step = s.moved_bytes_per_step
    mean_bytes = bytes_per_step / messages
    if mean_bytes >= BUCKET_BYTES:
        return None
    needed = max(1, math.ceil(bytes_per_step / BUCKET_BYTES))
    if messages - needed < MIN_MESSAGES / 2:
        return None
    return messages, needed, mean_bytes
