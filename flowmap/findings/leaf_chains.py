"""An array leaf with declared dims carried unchanged through a chain of middle roles.

The whole-payload pairs of `pass_through` miss a leaf that is repacked on the
way (a list of trajectories collated into a batch, a batch cut into
micro-batches): the payload changes, the array does not. Leaves whose hops
named their dims are matched across seams by name (`[*].indexer_topk` is
`indexer_topk`), dtype and dim names (a leading `batch` ignored); a role that
receives such a leaf from one role and sends it to another is a middle. One
finding per leaf, unless every middle is already a whole-payload
pass-through. At stake: the leaf's bytes per step on the seams into the
middles, which a handle would keep off them; the final consumers still read
theirs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import PASS_THROUGH, Finding, leaf_name, per_step
from flowmap.model.types import ARRAY_KINDS, role_of

if TYPE_CHECKING:
    from flowmap.model.view import RunView

# A leaf collated into a batch gains a leading `batch` dim; it is still the same array.
COLLATED_DIMS = ("batch",)
LeafKey = tuple[str, str, tuple[str, ...]]  # (leaf name, dtype, dims without `batch`)
RoleEdge = tuple[str, str]


def detect(view: RunView, covered: set[str]) -> list[Finding]:
    """One finding per chained leaf whose middles are not all in `covered`."""
    edges: dict[LeafKey, dict[RoleEdge, list[tuple[str, float]]]] = defaultdict(
        lambda: defaultdict(list))
    for key, s in view.seams.items():
        for leaf in s.leaves:
            if not leaf.dims or leaf.kind not in ARRAY_KINDS or not leaf.total_bytes:
                continue
            dims = tuple(d for i, d in enumerate(leaf.dims) if i or d not in COLLATED_DIMS)
            lk = (leaf_name(leaf.path), leaf.dtype, dims)
            edges[lk][(role_of(key[0]), role_of(key[1]))].append(
                (s.label, leaf.total_bytes / view.num_steps))
    out = []
    for (name, _, dims), by_role in sorted(edges.items()):
        middles = _middles(set(by_role))
        if not middles or middles <= covered:
            continue
        into = {e: v for e, v in by_role.items() if e[1] in middles}
        onward = {e: v for e, v in by_role.items() if e[0] in middles}
        bps = sum(b for v in into.values() for _, b in v)
        labels = sorted({label for v in (*into.values(), *onward.values()) for label, _ in v})
        route, ordered = _route(set(into) | set(onward), middles)
        out.append(Finding(
            PASS_THROUGH, labels, bps,
            f"`{name}` ({', '.join(dims)}) rides {' -> '.join(route)} unchanged (same leaf, "
            f"dtype and dims on every hop, only repacked): keep it in a store where it is made "
            f"and pass {' and '.join(ordered)} a handle instead, so the last hop reads just the "
            f"rows it needs and {per_step(bps)} stay off the middle roles.",
        ))
    return out


def _middles(role_edges: set[RoleEdge]) -> set[str]:
    """Roles that receive the leaf from one role and send it on to another."""
    out = set()
    for src, mid in role_edges:
        if src == mid:
            continue
        if any(a == mid and b not in (mid, src) for a, b in role_edges):
            out.add(mid)
    return out


def _route(role_edges: set[RoleEdge], middles: set[str]) -> tuple[list[str], list[str]]:
    """(["rollout", "ready_buffer", "batcher", "reward, trainer"], the middles in that order)."""
    sources = sorted({a for a, b in role_edges if a not in middles})
    sinks = sorted({b for a, b in role_edges if b not in middles})
    order: list[str] = []
    frontier, seen = set(sources), set(sources)
    while frontier:
        nxt = sorted({b for a, b in role_edges if a in frontier and b in middles and b not in seen})
        order += nxt
        seen.update(nxt)
        frontier = set(nxt)
    order += sorted(middles - set(order))
    return [", ".join(sources), *order, ", ".join(sinks)], order
