"""A prefix resent every turn: an array leaf that grows from hop to hop of one conversation.

A multi-turn rollout that returns, each turn, the replay arrays (routed experts,
log-probs, token ids, as arrays or Python lists of numbers) for the whole
conversation so far resends every earlier
turn's rows (sgl-project/sglang #24851: ~1 s latency spikes). Seen from the
shapes of successive messages on one seam: an array leaf whose leading
(sequence) dimension grows from message to message, the other dimensions
unchanged. Each growth resends the previous message's leaf, which the receiver
already had; *at stake*: those bytes, per step.

Conversations are interleaved (a batch of them in flight), so within a step
each message continues the open chain that waited longest for its next turn
among those it can extend (`flowmap.findings.growth`), or opens one. Sequences of varied lengths
also line up that way now and then, so a seam counts only when the chains are
the stream's shape: at least `MIN_TURNS` messages long on average, covering
`MIN_COVERED` of its messages, and each growth adding at least half of the
chain's first length (a turn, not a few tokens' jitter). Item ids on the hops
(`tag_items`, `flowmap.hop(items=...)`) name the conversations outright: then
the chains are theirs. The values are not read, so this assumes the first rows
are the earlier turn's (what the growth pattern means in every case the field
reports).

Shapes are read as traced: under `--project`, each resent leaf's bytes are
scaled by the factor the projection gave that hop's leaf.
"""

from __future__ import annotations

from collections import defaultdict
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from flowmap.findings import content_chains, growth
from flowmap.findings.common import PREFIX_RESEND, Finding, RoleKey, one_each, per_step, role_key
from flowmap.model.format import fmt_dim, role_label, seam_label
from flowmap.model.types import ARRAY_KINDS

if TYPE_CHECKING:
    from flowmap.model.view import RunView
    from flowmap.read.events import Leaf

MIN_TURNS = 3  # hops of one item on one seam, each larger than the one before
_first = itemgetter(0)


def detect(view: RunView) -> list[Finding]:
    hops = list(view.events.hops)
    traced = list(view.traced_hops) if view.traced_hops is not None else hops
    if len(traced) != len(hops):
        traced = hops
    # (seam, items, leaf path) -> [(traced leaf, projected bytes)] in time order
    chains: dict[tuple[Any, ...], list[tuple[Leaf, int]]] = defaultdict(list)
    untagged: dict[tuple[Any, ...], list[growth.Message]] = defaultdict(list)
    windows: dict[tuple[Any, ...], list[tuple[int, ...] | None]] = defaultdict(list)
    # (src, dst, text or not) -> (t_ns, leaf) of every message src sent dst: a seam's
    # answers, text to a stream of text (a transcript's), arrays to the others
    sent: dict[tuple[str, str, bool], list[tuple[int, Leaf]]] = defaultdict(list)
    for t in traced:
        for leaf in t.leaves:
            if leaf.shape and (leaf.kind in ARRAY_KINDS or _text(leaf)):
                sent[(t.src, t.dst, _text(leaf))].append((t.t_ns, leaf))
    for h, t in zip(hops, traced):
        if h.transport == "ref":
            continue
        projected = {leaf.path: leaf.nbytes for leaf in h.leaves}
        for leaf in t.leaves:
            if leaf.shape and (leaf.kind in ARRAY_KINDS or _number_list(leaf) or _text(leaf)) \
                    and not _header(leaf):
                if t.items:
                    chains[((t.src, t.dst, t.name), t.items, leaf.path)].append(
                        (leaf, projected.get(leaf.path, leaf.nbytes)))
                else:
                    untagged[((t.src, t.dst, t.name), leaf.path)].append(
                        (leaf, projected.get(leaf.path, leaf.nbytes), t.step, t.t_ns))
                    windows[((t.src, t.dst, t.name), leaf.path)].append(
                        dict(t.windows).get(leaf.path) if t.windows else None)
    for replies in sent.values():
        replies.sort(key=_first)
    for (key, path), stream in untagged.items():
        crcs = windows[(key, path)]
        read = []  # conversations the content shows (serialised), else the shapes'
        if sum(w is not None for w in crcs) * 2 >= len(crcs):
            read = [c for c in content_chains.chains(stream, [w or () for w in crcs])
                    if len(c) >= MIN_TURNS]
        if not read:
            read = growth.chains(stream, sent.get((key[1], key[0], _text(stream[0][0]))))
        for i, chain in enumerate(read):
            chains[(key, ("chain", i), path)] = chain
    resent: dict[RoleKey, float] = defaultdict(float)
    labels: dict[RoleKey, set[str]] = defaultdict(set)
    example: dict[RoleKey, tuple[str, list[Any]]] = {}
    for (key, _, path), chain in chains.items():
        got = _resent(chain)
        if got is None:
            continue
        nbytes, sizes = got
        rk = role_key(key)
        resent[rk] += nbytes
        labels[rk].add(seam_label(key))
        if rk not in example or len(sizes) > len(example[rk][1]):
            example[rk] = (path, sizes)
    def say(rk: RoleKey, bps: float) -> str:
        path, sizes = example[rk]
        grows = " → ".join(fmt_dim(d) for d in sizes[:4]) + (" → …" if len(sizes) > 4 else "")
        return (f"`{role_label(rk)}` resends the earlier turns of `{path or rk[2]}` every turn "
                f"(it grows {grows} in one conversation), {per_step(bps)} resent: send only the "
                "new rows and keep the prefix at the receiver.")

    return one_each(PREFIX_RESEND, view, resent, labels, say)


def _header(leaf: Leaf) -> bool:
    """A length sent ahead of the array it sizes (`dist.send` carries no shape): a leaf of
    one or two numbers is no sequence, and between a stream's messages it breaks no chain."""
    return len(leaf.shape) <= 1 and isinstance(leaf.shape[0], int) and leaf.shape[0] <= 2


def _text(leaf: Leaf) -> bool:
    """One string (a chat transcript, a prompt), its length its one dim: a transcript sent
    whole every turn grows as a token array does, and an engine's answer is text too."""
    return leaf.kind == "str" and not leaf.path.endswith("[*]")


def _number_list(leaf: Leaf) -> bool:
    """A Python list of numbers (`token_ids[*]`, as JSON and OpenAI-style servers return them)."""
    return leaf.kind in ("int", "float") and leaf.path.endswith("[*]")


def _resent(chain: list[tuple[Leaf, int]]) -> tuple[float, list[Any]] | None:
    """(bytes resent, the growing dim's sizes) when the leaf grew on `MIN_TURNS` hops in a row."""
    best: tuple[float, list[Any]] | None = None
    run_bytes, turns = 0.0, 1
    sizes: list[Any] = []
    for (prev, prev_bytes), (cur, _) in zip(chain, chain[1:]):
        axis = _grown_axis(prev.shape, cur.shape)
        if axis is None:
            if turns >= MIN_TURNS:
                best = _add(best, run_bytes, sizes)
            run_bytes, sizes, turns = 0.0, [], 1
            continue
        if not sizes:
            sizes = [prev.shape[axis]]
        sizes.append(cur.shape[axis])
        run_bytes += prev_bytes
        turns += 1
    if turns >= MIN_TURNS:
        best = _add(best, run_bytes, sizes)
    return best


def _add(best: tuple[float, list[Any]] | None, nbytes: float,
         sizes: list[Any]) -> tuple[float, list[Any]]:
    if best is None:
        return nbytes, sizes
    return best[0] + nbytes, sizes if len(sizes) > len(best[1]) else best[1]


def _grown_axis(a: tuple[Any, ...], b: tuple[Any, ...]) -> int | None:
    """The one dim along which shape `b` is larger than `a`, all others equal; else None."""
    if len(a) != len(b):
        return None
    grown = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(grown) != 1:
        return None
    i = grown[0]
    x, y = a[i], b[i]
    if isinstance(x, tuple) or isinstance(y, tuple) or y <= x:
        return None
    return i
