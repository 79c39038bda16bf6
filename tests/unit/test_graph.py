"""The graph model: owners or roles as nodes, seams as edges, aggregates on both, stable ids."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from runs import RLRunSpec, ShardWriter, tensor, write_rl_run, write_two_owner_run

import flowmap
from flowmap.model.graph import MAX_RESIDENT_POINTS, build_graph, heaviest_edges


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("rl") / "run")))


def _plain(g):
    """Everything but the SeamStats objects, for equality checks."""
    nodes = [(n, dict(a)) for n, a in g.nodes(data=True)]
    edges = [(u, v, k, {x: y for x, y in a.items() if x != "stats"})
             for u, v, k, a in g.edges(keys=True, data=True)]
    return nodes, edges


def test_expanded_nodes_are_owners_and_edges_are_seams_keyed_by_label(rl_run):
    g = build_graph(rl_run)
    assert list(g.nodes) == sorted(rl_run.owners)
    keys = [k for _, _, k in g.edges(keys=True)]
    assert keys == sorted(s.label for s in rl_run.seams.values())
    e = g.edges["rollout/0", "ready_buffer", "rollout/0 -> ready_buffer : trajectory"]
    s = rl_run.seams[("rollout/0", "ready_buffer", "trajectory")]
    assert (e["hops"], e["total_bytes"], e["max_bytes"]) == (s.hops, s.total_bytes, s.max_bytes)
    assert e["bytes_per_step_mean"] == s.total_bytes / rl_run.num_steps
    assert e["min_bytes"] <= e["p50_bytes"] <= e["p90_bytes"] <= e["p99_bytes"] <= e["max_bytes"]
    assert e["transports"] == {"pickle": 16}
    assert e["dtypes"] == ["float32", "int32", "int64"]
    tokens = next(leaf for leaf in e["leaves"] if leaf["path"] == "input_ids")
    assert isinstance(tokens["shape"][0], list)  # the dynamic dim is a [min, max] range
    assert e["residency_mean_s"] > 0 and e["stats"] is s


def test_node_totals_are_the_sum_of_their_edges(rl_run):
    g = build_graph(rl_run)
    for node, a in g.nodes(data=True):
        assert a["bytes_in"] == sum(d["total_bytes"] for _, _, d in g.in_edges(node, data=True))
        assert a["bytes_out"] == sum(d["total_bytes"] for _, _, d in g.out_edges(node, data=True))
        assert a["bytes_out_per_step"] == a["bytes_out"] / rl_run.num_steps
    assert g.nodes["trainer/rank1"]["pids"] == [3001]


def test_collapsed_nodes_are_roles_with_instance_counts(rl_run):
    g = build_graph(rl_run, expand_instances=False)
    assert g.nodes["rollout"]["label"] == "rollout ×2"
    assert g.nodes["rollout"]["instances"] == ["rollout/0", "rollout/1"]
    assert g.nodes["driver"]["label"] == "driver"
    e = g.edges["rollout", "ready_buffer", "rollout -> ready_buffer : trajectory"]
    parts = [s for k, s in rl_run.seams.items() if k[1] == "ready_buffer" and k[2] == "trajectory"]
    assert e["total_bytes"] == sum(s.total_bytes for s in parts)
    assert e["hops"] == 32
    assert e["instances"] == ["rollout/0 -> ready_buffer : trajectory",
                              "rollout/1 -> ready_buffer : trajectory"]
    assert g.graph["total_bytes"] == build_graph(rl_run).graph["total_bytes"]


def test_only_the_edges_closing_the_rl_loop_are_back_edges(rl_run):
    for expand in (True, False):
        g = build_graph(rl_run, expand_instances=expand)
        back = sorted(k for _, _, k, b in g.edges(keys=True, data="back_edge") if b)
        want = (["weight_sync -> rollout/0 : weights", "weight_sync -> rollout/1 : weights"]
                if expand else ["weight_sync -> rollout : weights"])
        assert back == want
    order = build_graph(rl_run, expand_instances=False).nodes(data="order")
    assert order["dataset"] < order["rollout"] < order["trainer"] < order["weight_sync"]


def test_resident_items_rise_and_fall_at_the_ready_buffer(rl_run):
    g = build_graph(rl_run)
    series = g.nodes["ready_buffer"]["resident"]
    counts = [c for _, c in series]
    assert g.nodes["ready_buffer"]["resident_max"] == max(counts) >= 7
    assert counts[-1] == 0  # every trajectory left or was dropped
    assert [t for t, _ in series] == sorted(t for t, _ in series)
    assert g.nodes["dataset"]["resident"] == []


def test_long_resident_series_are_bounded_and_keep_the_peak(tmp_path):
    n = 3 * MAX_RESIDENT_POINTS
    arrive = [(i * 10, "a", "b", "x", 8, [i]) for i in range(n)]
    leave = [(n * 10 + i * 10, "b", "c", "x", 8, [i]) for i in range(n)]
    g = build_graph(flowmap.load(write_two_owner_run(str(tmp_path / "run"), arrive + leave)))
    series = g.nodes["b"]["resident"]
    assert len(series) <= MAX_RESIDENT_POINTS
    assert g.nodes["b"]["resident_max"] == n
    assert series[-1][1] < n // 100


def test_hops_without_items_hold_nothing(tmp_path):
    run_dir = write_two_owner_run(str(tmp_path / "run"), [(0, "a", "b", "x", 8)])
    g = build_graph(flowmap.load(run_dir))
    assert g.nodes["b"]["resident"] == [] and g.nodes["b"]["resident_max"] == 0


def test_the_graph_is_deterministic(tmp_path):
    a = build_graph(flowmap.load(write_rl_run(str(tmp_path / "a"))))
    b = build_graph(flowmap.load(write_rl_run(str(tmp_path / "b"))))
    na, ea = _plain(a)
    nb, eb = _plain(b)
    assert na == nb and ea == eb


def test_heaviest_edges_come_first(rl_run):
    edges = heaviest_edges(build_graph(rl_run))
    values = [a["bytes_per_step_mean"] for *_, a in edges]
    assert values == sorted(values, reverse=True)


def test_an_empty_run_is_an_empty_graph(tmp_path):
    g = build_graph(flowmap.load(write_two_owner_run(str(tmp_path / "run"), [])))
    assert g.number_of_nodes() == 0 and g.graph["total_bytes"] == 0


def test_readers_of_the_model_never_import_torch(tmp_path):
    """GIVEN a run WHEN graph, findings, DOT, Perfetto and the CLI verbs are used THEN no torch."""
    run_dir = write_rl_run(str(tmp_path / "run"), RLRunSpec(hostile=True))
    code = textwrap.dedent(f"""
        import sys
        import flowmap
        from flowmap.model.graph import build_graph
        from flowmap.findings import findings
        from flowmap.reporters.dot import dot_source
        from flowmap.reporters import graphviz
        from flowmap.reporters.perfetto import perfetto_trace
        from flowmap.reporters.json_document import report_document
        import flowmap.cli.render, flowmap.cli.export
        run = flowmap.load({run_dir!r})
        view = run.view
        build_graph(run); dot_source(view); findings(view); perfetto_trace(view); report_document(view)
        assert "torch" not in sys.modules, "torch was imported"
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_one_off_set_up_hop_does_not_turn_the_loop_around(tmp_path):
    """GIVEN initial weights sent driver -> trainer before anything else THEN the pipeline still
    reads driver, rollout, buffer, trainer, weight_sync, and only weight_sync -> rollout loops."""
    w = ShardWriter(os.path.join(tmp_path, "run", "h-1-0001.flowmap.jsonl"), 1)
    w.hop(0, "driver", "trainer/rank0", "initial_weights", [tensor("w", (512, 512))])
    t = 10
    for step in range(3):
        for k in range(8):
            w.hop(t, "driver", f"rollout/{k % 2}", "request", [tensor("p", (8,))], step=step)
            w.hop(t + 1, f"rollout/{k % 2}", "ready_buffer", "trajectory", [tensor("x", (32,))],
                  step=step)
            t += 2
        w.hop(t, "ready_buffer", "trainer/rank0", "batch", [tensor("x", (8, 32))], step=step)
        w.hop(t + 1, "trainer/rank0", "weight_sync", "state_dict", [tensor("w", (512, 512))],
              step=step)
        for k in range(2):
            w.hop(t + 2, "weight_sync", f"rollout/{k}", "weights", [tensor("w", (512, 512))],
                  step=step)
        t += 10
    w.close(t)
    g = build_graph(flowmap.load(str(tmp_path / "run")))
    back = sorted(k for _, _, k, b in g.edges(keys=True, data="back_edge") if b)
    assert back == ["weight_sync -> rollout/0 : weights", "weight_sync -> rollout/1 : weights"]
    order = sorted(g.nodes, key=lambda n: g.nodes[n]["order"])
    assert order == ["driver", "rollout/0", "rollout/1", "ready_buffer", "trainer/rank0",
                     "weight_sync"]
