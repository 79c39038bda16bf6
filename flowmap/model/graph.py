"""The dataflow graph of a run: owners (or roles) as nodes, seams as edges.

Renderers (DOT, HTML) and anything else that draws or walks the pipeline read
this graph rather than the hops, so a figure on an edge means the same thing
in every picture. The numbers come from `flowmap.model.aggregate`; this module
only arranges them, collapses instances into roles on request, and decides
which edges close a cycle (the RL loop weight_sync -> rollout) so a layout can
keep them from dragging the picture backwards.

Edge keys are seam labels (`"src -> dst : name"`): stable across runs of the
same program, which is what diff and golden files need. Nodes and edges are
inserted in sorted order. Plain data only: never imports torch.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import networkx as nx

from flowmap.model.aggregate import SeamKey, SeamStats, percentile, role_of, seam_label, seam_stats
from flowmap.model.reader import Drop, Hop
from flowmap.model.run import paused_gc

if TYPE_CHECKING:
    from flowmap.model.run import Run

# Resident-item series are bucketed to at most this many points per node: a
# chart needs the shape, and a million-hop run must not make a million points.
MAX_RESIDENT_POINTS = 256


class _RoleView:
    """The run with every owner replaced by its role, for `aggregate.seam_stats`."""

    def __init__(self, run: Run) -> None:
        roles: dict[str, str] = {}

        def role(owner: str) -> str:
            r = roles.get(owner)
            if r is None:
                r = roles[owner] = role_of(owner)
            return r

        self.hops = [
            Hop(h.t_ns, h.pid, role(h.src), role(h.dst), h.name, h.nbytes, h.leaves, h.storages,
                h.step, h.version, h.transport, h.items)
            for h in run.hops
        ]
        self.drops = [Drop(d.t_ns, d.pid, role(d.owner), d.reason, d.items) for d in run.drops]
        self.num_steps = run.num_steps


def build_graph(run: Run, *, expand_instances: bool = True) -> nx.MultiDiGraph:
    """The run as a graph; `expand_instances=False` merges `rollout/0`, `rollout/1` into `rollout`.

    Node attributes: `label`, `role`, `instances`, `bytes_in`, `bytes_out`,
    `hops_in`, `hops_out`, `bytes_in_per_step`, `bytes_out_per_step`, `pids`,
    `order` (pipeline position, see `_mark_back_edges`), `resident` (list of
    `(seconds, items held)`), `resident_max`.
    Edge attributes: see `_edge_attrs`; `back_edge` marks edges that close a cycle.
    """
    with paused_gc():  # many small records, no cycles: see flowmap.model.run.paused_gc
        return _build(run, expand_instances)


def _build(run: Run, expand_instances: bool) -> nx.MultiDiGraph:
    node_of = (lambda owner: owner) if expand_instances else role_of
    seams = run.seams if expand_instances else seam_stats(_RoleView(run))  # type: ignore[arg-type]
    g = nx.MultiDiGraph(
        run=run.path,
        num_steps=run.num_steps,
        expand_instances=expand_instances,
        total_bytes=sum(s.total_bytes for s in seams.values()),
        total_bytes_per_step=sum(s.bytes_per_step_mean for s in seams.values()),
    )
    instances = _instances(run, node_of)
    for name in sorted(instances):
        g.add_node(name, **_node_attrs(name, instances[name], run))
    members = _members(run, node_of)
    for key in sorted(seams):
        s = seams[key]
        g.add_edge(s.src, s.dst, key=seam_label(key),
                   **_edge_attrs(s, run, members.get(key, [seam_label(key)])))
    _add_flow_totals(g, run.num_steps)
    _mark_back_edges(g)
    _add_residency(g, run, node_of)
    return g


def _instances(run: Run, node_of: Any) -> dict[str, list[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for owner in run.owners:
        out[node_of(owner)].add(owner)
    for d in run.drops:
        out[node_of(d.owner)].add(d.owner)
    return {k: sorted(v) for k, v in out.items()}


def _members(run: Run, node_of: Any) -> dict[SeamKey, list[str]]:
    """Node-level seam -> the owner-level seam labels it merges."""
    out: dict[SeamKey, list[str]] = defaultdict(list)
    for key in sorted(run.seams):
        src, dst, name = key
        out[(node_of(src), node_of(dst), name)].append(seam_label(key))
    return out


def _node_attrs(name: str, instances: list[str], run: Run) -> dict[str, Any]:
    owners = [run.owners[o] for o in instances if o in run.owners]
    role = role_of(name)
    return {
        "label": f"{name} ×{len(instances)}" if len(instances) > 1 else name,
        "role": role,
        "instances": instances,
        "pids": sorted({p for o in owners for p in o.pids}),
        "order": 0,
        "bytes_in": 0,
        "bytes_out": 0,
        "hops_in": 0,
        "hops_out": 0,
    }


def _edge_attrs(s: SeamStats, run: Run, members: list[str]) -> dict[str, Any]:
    sizes = sorted(s.hop_bytes)
    dtypes = sorted({dt for leaf in s.leaves for dt in leaf.dtypes})
    return {
        "id": s.label,
        "src": s.src,
        "dst": s.dst,
        "name": s.name,
        "label": s.label,
        "hops": s.hops,
        "total_bytes": s.total_bytes,
        "bytes_per_step_mean": s.bytes_per_step_mean,
        "bytes_per_step_max": s.bytes_per_step_max,
        "hops_per_step": s.hops_per_step,
        "min_bytes": sizes[0] if sizes else 0,
        "p50_bytes": s.p50_bytes,
        "p90_bytes": s.p90_bytes,
        "p99_bytes": percentile(sizes, 0.99),
        "max_bytes": s.max_bytes,
        "leaves": [leaf.as_dict() for leaf in s.leaves],
        "dtypes": dtypes,
        "transports": dict(s.transports),
        "residency_mean_s": s.residency_mean_s,
        "residency_max_s": s.residency_max_s,
        "items": s.items,
        "first_t_s": (s.first_t_ns - run.t0_ns) / 1e9,
        "last_t_s": (s.last_t_ns - run.t0_ns) / 1e9,
        "instances": members,
        "back_edge": False,
        "stats": s,  # the SeamStats itself, for renderers that need per-hop sizes
    }


def _add_flow_totals(g: nx.MultiDiGraph, num_steps: int) -> None:
    for src, dst, attrs in g.edges(data=True):
        g.nodes[src]["bytes_out"] += attrs["total_bytes"]
        g.nodes[src]["hops_out"] += attrs["hops"]
        g.nodes[dst]["bytes_in"] += attrs["total_bytes"]
        g.nodes[dst]["hops_in"] += attrs["hops"]
    for _, attrs in g.nodes(data=True):
        attrs["bytes_in_per_step"] = attrs["bytes_in"] / num_steps
        attrs["bytes_out_per_step"] = attrs["bytes_out"] / num_steps


def _mark_back_edges(g: nx.MultiDiGraph) -> None:
    """Set each node's `order` and mark the edges that close a cycle (`back_edge`).

    The walk runs on roles (`rollout`, not `rollout/0`) so that parallel
    instances sit side by side; within a role, instances keep name order.
    Every edge not marked goes forward in `order`, so dropping the marked
    ones leaves a DAG and a layered layout keeps the pipeline top to bottom
    while the loop is still drawn.
    """
    hops: dict[tuple[str, str], int] = defaultdict(int)
    first: dict[str, int] = {}
    for u, v, a in g.edges(data=True):
        ru, rv = g.nodes[u]["role"], g.nodes[v]["role"]
        hops[(ru, rv)] += a["hops"]
        for role in (ru, rv):
            first[role] = min(first.get(role, a["stats"].first_t_ns), a["stats"].first_t_ns)
    roles = sorted({a["role"] for _, a in g.nodes(data=True)})
    role_order, back = _walk(roles, hops, first)
    ranked = sorted(g.nodes, key=lambda n: (role_order[g.nodes[n]["role"]], n))
    for i, node in enumerate(ranked):
        g.nodes[node]["order"] = i
    for u, v, k in g.edges(keys=True):
        ru, rv = g.nodes[u]["role"], g.nodes[v]["role"]
        is_back = (ru, rv) in back if ru != rv else g.nodes[v]["order"] <= g.nodes[u]["order"]
        g.edges[u, v, k]["back_edge"] = is_back


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


def _add_residency(g: nx.MultiDiGraph, run: Run, node_of: Any) -> None:
    """Items held by each node over time: +1 on arrival, -1 on leaving or being dropped.

    An item that is consumed where it ends (a trainer) never leaves: the
    trace holds no "consumed" event, so its last holder keeps counting it.
    """
    held: dict[str, set[Any]] = defaultdict(set)
    series: dict[str, list[tuple[float, int]]] = defaultdict(list)
    t0 = run.t0_ns
    events: Iterator[tuple[int, int, Any]] = heapq.merge(((h.t_ns, 0, h) for h in run.hops if h.items),
                         ((d.t_ns, 1, d) for d in run.drops if d.items),
                         key=lambda e: (e[0], e[1]))
    for t_ns, kind, ev in events:
        t = (t_ns - t0) / 1e9
        if kind == 0:
            src, dst = node_of(ev.src), node_of(ev.dst)
            _leave(held[src], series[src], ev.items, t)
            here = held[dst]
            here.update(ev.items)
            series[dst].append((t, len(here)))
        else:
            owner = node_of(ev.owner)
            _leave(held[owner], series[owner], ev.items, t)
    for node, attrs in g.nodes(data=True):
        points = _bucket_max(series.get(node, []))
        attrs["resident"] = points
        attrs["resident_max"] = max((c for _, c in points), default=0)


def _leave(here: set[Any], points: list[tuple[float, int]], items: tuple, t: float) -> None:
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


def heaviest_edges(g: nx.MultiDiGraph) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Edges as `(src, dst, key, attrs)`, most bytes per step first (ties by key)."""
    edges = [(u, v, k, a) for u, v, k, a in g.edges(keys=True, data=True)]
    edges.sort(key=lambda e: (-e[3]["bytes_per_step_mean"], e[2]))
    return edges
