"""The pipeline of a run: owners (or roles) in order, seams placed, the loop's back edges found.

Computed once here and read by every picture (DOT, HTML, the networkx
graph): which node comes first, which edges close a cycle (the RL loop
weight_sync -> rollout) and how many items each node held over time. At role
level, `rollout/0` and `rollout/1` merge into `rollout` and their seams are
re-aggregated from the hops, so percentiles are of the merged hops, not an
average of averages.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from flowmap.gc_pause import paused_gc
from flowmap.model.aggregate import seam_stats
from flowmap.model.format import seam_label
from flowmap.model.sources import PipelineSource
from flowmap.model.types import (
    Edge,
    ItemId,
    Level,
    Node,
    Pipeline,
    SeamKey,
    SeamStats,
    role_of,
)
from flowmap.read.events import Drop, DropFold, Hop, SeamStep

# Resident-item series are bucketed to at most this many points per node: a
# chart needs the shape, and a million-hop run must not make a million points.
MAX_RESIDENT_POINTS = 256


@dataclass(slots=True)
class _RoleHops:
    """The run's hops and drops with every owner replaced by its role (a `HopSource`)."""

    hops: Sequence[Hop]
    seam_steps: Sequence[SeamStep]
    drops: Sequence[Drop]
    num_steps: int

    @classmethod
    def of(cls, run: PipelineSource) -> _RoleHops:
        roles: dict[str, str] = {}

        def role(owner: str) -> str:
            r = roles.get(owner)
            if r is None:
                r = roles[owner] = role_of(owner)
            return r

        # `replace` keeps every field a hop has, whatever the reader adds later.
        ev = run.events
        hops = [replace(h, src=role(h.src), dst=role(h.dst)) for h in ev.hops]
        folded = [replace(st, src=role(st.src), dst=role(st.dst)) for st in ev.seam_steps]
        drops = [replace(d, owner=role(d.owner)) for d in ev.drops]
        return cls(hops, folded, drops, run.num_steps)


def _same(owner: str) -> str:
    return owner


def build_pipeline(run: PipelineSource, level: Level) -> Pipeline:
    """The run's pipeline with one node per owner (`"owner"`) or per role (`"role"`)."""
    with paused_gc():  # many small records, no cycles: see flowmap.gc_pause
        return _build(run, level)


def _build(run: PipelineSource, level: Level) -> Pipeline:
    node_of: Callable[[str], str] = _same if level == "owner" else role_of
    seams = run.seams if level == "owner" else seam_stats(_RoleHops.of(run))
    instances = _instances(run, node_of)
    members = _members(run, node_of)
    keys = sorted(seams, key=seam_label)
    edges = [(seams[k], tuple(members.get(k, [seam_label(k)]))) for k in keys]
    order, back = _order(instances, [s for s, _ in edges])
    resident = _residency(run, node_of)
    nodes = [_node(name, instances[name], edges, run, order[name], resident.get(name, []))
             for name in instances]
    nodes.sort(key=lambda n: (n.order, n.name))
    return Pipeline(
        level=level,
        nodes=tuple(nodes),
        edges=tuple(Edge(s, m, _is_back(s, order, back)) for s, m in edges),
        total_bytes=sum(s.total_bytes for s in seams.values()),
        total_bytes_per_step=sum(s.bytes_per_step_mean for s in seams.values()),
    )


def _instances(run: PipelineSource, node_of: Callable[[str], str]) -> dict[str, list[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for owner in run.owners:
        out[node_of(owner)].add(owner)
    dropped: list[Drop | DropFold] = [*run.events.drops, *run.events.drop_folds]
    for d in dropped:
        out[node_of(d.owner)].add(d.owner)
    return {k: sorted(out[k]) for k in sorted(out)}


def _members(run: PipelineSource, node_of: Callable[[str], str]) -> dict[SeamKey, list[str]]:
    """Node-level seam -> the owner-level seam labels it merges."""
    out: dict[SeamKey, list[str]] = defaultdict(list)
    for key in sorted(run.seams):
        src, dst, name = key
        out[(node_of(src), node_of(dst), name)].append(seam_label(key))
    return out


def _node(name: str, instances: list[str], edges: list[tuple[SeamStats, tuple[str, ...]]],
          run: PipelineSource, order: int, resident: list[tuple[float, int]]) -> Node:
    owners = [run.owners[o] for o in instances if o in run.owners]
    into = [s for s, _ in edges if s.dst == name]
    out = [s for s, _ in edges if s.src == name]
    bytes_in, bytes_out = sum(s.total_bytes for s in into), sum(s.total_bytes for s in out)
    points = _bucket_max(resident)
    return Node(
        name=name,
        role=role_of(name),
        instances=tuple(instances),
        pids=tuple(sorted({p for o in owners for p in o.pids})),
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        hops_in=sum(s.hops for s in into),
        hops_out=sum(s.hops for s in out),
        bytes_in_per_step=bytes_in / run.num_steps,
        bytes_out_per_step=bytes_out / run.num_steps,
        order=order,
        resident=tuple(points),
        resident_max=max((c for _, c in points), default=0),
        hosts=tuple(sorted({h for o in owners for h in o.hosts})),
    )


def _order(instances: dict[str, list[str]], seams: list[SeamStats]
           ) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Each node's pipeline position, and the role pairs whose edges close a cycle.

    The walk runs on roles (`rollout`, not `rollout/0`) so that parallel
    instances sit side by side; within a role, instances keep name order.
    Every edge not marked goes forward in `order`, so dropping the marked
    ones leaves a DAG and a layered layout keeps the pipeline top to bottom
    while the loop is still drawn.
    """
    hops: dict[tuple[str, str], int] = defaultdict(int)
    first: dict[str, int] = {}
    for s in seams:
        ru, rv = role_of(s.src), role_of(s.dst)
        hops[(ru, rv)] += s.hops
        for role in (ru, rv):
            first[role] = min(first.get(role, s.first_t_ns), s.first_t_ns)
    roles = sorted({role_of(n) for n in instances})
    role_order, back = _walk(roles, hops, first)
    ranked = sorted(instances, key=lambda n: (role_order[role_of(n)], n))
    return {n: i for i, n in enumerate(ranked)}, back


def _is_back(s: SeamStats, order: dict[str, int], back: set[tuple[str, str]]) -> bool:
    ru, rv = role_of(s.src), role_of(s.dst)
    return (ru, rv) in back if ru != rv else order[s.dst] <= order[s.src]


def _walk(
    nodes: list[str], hops: dict[tuple[str, str], int], first: dict[str, int]
) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """(reverse post-order, back edges) of a depth-first walk of the role graph.

    It starts from the sources (nothing flows in: the dataset) and follows
    the busiest edges first (most hops: the pipeline's main path, not a
    one-off set-up hop such as initial weights sent to the trainer); an edge
    back to a node still on the walk closes a cycle: weight_sync -> rollout,
    a reply to its caller.
    """
    out: dict[str, list[str]] = defaultdict(list)
    has_input: set[str] = set()
    for (u, v), _ in sorted(hops.items(), key=lambda e: (-e[1], first.get(e[0][1], 0), e[0])):
        out[u].append(v)
        if u != v:
            has_input.add(v)

    def appearance(n: str) -> tuple[int, str]:
        return (first.get(n, 2**63), n)

    roots = sorted((n for n in nodes if n not in has_input), key=appearance)
    back: set[tuple[str, str]] = set()
    done: list[str] = []
    state: dict[str, int] = {}  # 1 on the walk, 2 finished
    for root in roots + sorted(nodes, key=appearance):
        if root in state:
            continue
        state[root] = 1
        stack: list[tuple[str, Iterator[str]]] = [(root, iter(out[root]))]
        while stack:
            u, rest = stack[-1]
            nxt = next(rest, None)
            if nxt is None:
                stack.pop()
                state[u] = 2
                done.append(u)
            elif state.get(nxt) == 1:
                back.add((u, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(out[nxt])))
    return {n: i for i, n in enumerate(reversed(done))}, back


def _residency(run: PipelineSource, node_of: Callable[[str], str]) -> dict[str, list[tuple[float, int]]]:
    """Items held by each node over time: +1 on arrival, -1 on leaving or being dropped.

    An item that is consumed where it ends (a trainer) never leaves: the
    trace holds no "consumed" event, so its last holder keeps counting it.
    """
    held: dict[str, set[ItemId]] = defaultdict(set)
    series: dict[str, list[tuple[float, int]]] = defaultdict(list)
    t0 = run.t0_ns
    events: Iterator[tuple[int, int, Hop | Drop]] = heapq.merge(
        ((h.t_ns, 0, h) for h in run.events.hops if h.items),
        ((d.t_ns, 1, d) for d in run.events.drops if d.items),
        key=lambda e: (e[0], e[1]))
    for t_ns, _, ev in events:
        t = (t_ns - t0) / 1e9
        if isinstance(ev, Hop):
            src, dst = node_of(ev.src), node_of(ev.dst)
            _leave(held[src], series[src], ev.items, t)
            here = held[dst]
            here.update(ev.items)
            series[dst].append((t, len(here)))
        else:
            owner = node_of(ev.owner)
            _leave(held[owner], series[owner], ev.items, t)
    return series


def _leave(here: set[ItemId], points: list[tuple[float, int]], items: tuple[ItemId, ...],
           t: float) -> None:
    before = len(here)
    here.difference_update(items)
    if len(here) != before:
        points.append((t, len(here)))


def _bucket_max(points: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """At most MAX_RESIDENT_POINTS points, keeping each time bucket's peak."""
    if len(points) <= MAX_RESIDENT_POINTS:
        return [(round(t, 6), c) for t, c in points]
    t0, t1 = points[0][0], points[-1][0]
    width = (t1 - t0) / MAX_RESIDENT_POINTS or 1.0
    buckets: dict[int, tuple[float, int]] = {}
    for t, c in points:
        b = min(MAX_RESIDENT_POINTS - 1, int((t - t0) / width))
        if b not in buckets or c > buckets[b][1]:
            buckets[b] = (t, c)
    return [(round(t, 6), c) for _, (t, c) in sorted(buckets.items())]
