"""The run's pipeline as a networkx graph, for anyone who wants to walk it with networkx.

flowmap's own outputs read `RunView.pipeline` / `RunView.roles` directly;
this module only copies a `Pipeline` into a `MultiDiGraph`, so networkx stays
a detail and never the contract. Edge keys are seam labels (`"src -> dst :
name"`): stable across runs of the same program. Nodes and edges are
inserted in sorted order. Plain data only: never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import networkx as nx

from flowmap.model.json_forms import leaf_dict
from flowmap.model.pipeline import MAX_RESIDENT_POINTS
from flowmap.model.types import Edge, Node

if TYPE_CHECKING:
    from flowmap.model.run import Run

__all__ = ["MAX_RESIDENT_POINTS", "build_graph", "heaviest_edges"]


def build_graph(run: Run, *, expand_instances: bool = True) -> nx.MultiDiGraph:
    """The run as a graph; `expand_instances=False` merges `rollout/0`, `rollout/1` into `rollout`.

    Node attributes are the fields of `flowmap.model.types.Node` (plus
    `label`); edge attributes those of its `SeamStats` (plus `id`, `label`,
    `dtypes`, `instances`, `back_edge`, `first_t_s`, `last_t_s`, the leaves
    as dicts and `stats`, the `SeamStats` itself).
    """
    view = run.view
    p = view.pipeline_at(expand_instances)
    g = nx.MultiDiGraph(run=view.path, num_steps=view.num_steps, expand_instances=expand_instances,
                        total_bytes=p.total_bytes, total_bytes_per_step=p.total_bytes_per_step)
    for node in sorted(p.nodes, key=lambda n: n.name):
        g.add_node(node.name, **_node_attrs(node))
    for e in p.edges:
        g.add_edge(e.seam.src, e.seam.dst, key=e.seam.label, **_edge_attrs(e, view.t0_ns))
    return g


def _node_attrs(n: Node) -> dict[str, Any]:
    return {
        "label": n.label, "role": n.role, "instances": list(n.instances), "pids": list(n.pids),
        "order": n.order, "bytes_in": n.bytes_in, "bytes_out": n.bytes_out, "hops_in": n.hops_in,
        "hops_out": n.hops_out, "bytes_in_per_step": n.bytes_in_per_step,
        "bytes_out_per_step": n.bytes_out_per_step, "resident": list(n.resident),
        "resident_max": n.resident_max,
    }


def _edge_attrs(e: Edge, t0_ns: int) -> dict[str, Any]:
    s = e.seam
    return {
        "id": s.label, "src": s.src, "dst": s.dst, "name": s.name, "label": s.label,
        "hops": s.hops, "total_bytes": s.total_bytes, "bytes_per_step_mean": s.bytes_per_step_mean,
        "bytes_per_step_max": s.bytes_per_step_max, "hops_per_step": s.hops_per_step,
        "min_bytes": s.min_bytes, "p50_bytes": s.p50_bytes, "p90_bytes": s.p90_bytes,
        "p99_bytes": s.p99_bytes, "max_bytes": s.max_bytes,
        "leaves": [leaf_dict(leaf) for leaf in s.leaves], "dtypes": list(s.dtypes),
        "transports": dict(s.transports), "residency_mean_s": s.residency_mean_s,
        "residency_max_s": s.residency_max_s, "items": s.items,
        "first_t_s": (s.first_t_ns - t0_ns) / 1e9, "last_t_s": (s.last_t_ns - t0_ns) / 1e9,
        "instances": list(e.members), "back_edge": e.back_edge, "stats": s,
    }


def heaviest_edges(g: nx.MultiDiGraph) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Edges as `(src, dst, key, attrs)`, most bytes per step first (ties by key)."""
    edges = [(u, v, k, a) for u, v, k, a in g.edges(keys=True, data=True)]
    edges.sort(key=lambda e: (-e[3]["bytes_per_step_mean"], e[2]))
    return edges
