"""Ray hops named by what moved their bytes, from what each Ray process said of itself."""

from __future__ import annotations

import json

import flowmap

KIB = 1024


def _shard(run, pid, node, owner, hops):
    """A process on Ray `node` (None: not a Ray process) running `owner`, recording `hops`
    as (src, dst, name, nbytes, transport)."""
    names = sorted({x for h in hops for x in (h[0], h[1], h[2], h[4])} | {"cpu", "x", "float32"})
    sid = {n: i for i, n in enumerate(names)}
    lines = [{"flowmap": "trace", "schema": 1, "pid": pid, "ppid": 1, "host": "h", "argv": [],
              "process": None, "t0_mono_ns": 0, "t0_wall_ns": 0}]
    lines += [["s", i, n] for n, i in sid.items()]
    if node is not None:
        lines += [["i", 1, "ray_node_id", node], ["i", 1, "owner", owner]]
    for k, (src, dst, name, nbytes, transport) in enumerate(hops):
        leaf = [sid["x"], "tensor", [nbytes // 4], sid["float32"], sid["cpu"], nbytes, 1, None]
        lines += [["S", k, [leaf]],
                  ["h", 10 + k, sid[src], sid[dst], sid[name], k, nbytes, [k], None, None,
                   sid[transport], None]]
    run.mkdir(exist_ok=True)
    (run / f"h-{pid}-0000.flowmap.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _transports(run):
    return {s.label: dict(s.transports) for s in flowmap.load(str(run)).view.seams.values()}


def test_bytes_are_named_inline_object_store_or_across_nodes(tmp_path):
    # GIVEN a driver and a trainer on node A, Rollout/1 on A and Rollout/0 on node B
    run = tmp_path / "run"
    _shard(run, 10, "A", "driver", [
        ("Rollout/1", "driver", "small", 4 * KIB, "rpc"),      # inline in the reply
        ("Rollout/1", "driver", "big", 200 * KIB, "rpc"),      # over the inline limit
        ("Rollout/0", "driver", "far", 200 * KIB, "rpc"),      # ... from another node
        ("driver", "object_store", "put", 200 * KIB, "shm"),   # ray.put: stays as it is
    ])
    _shard(run, 20, "A", "Trainer/0", [
        ("Rollout/0", "Trainer/0", "absorb", 8 * KIB, "shm"),  # a ref from node B
        ("Rollout/1", "Trainer/0", "near", 8 * KIB, "shm"),    # a ref from node A
        ("driver", "Trainer/0", "train", 4 * KIB, "rpc"),      # inline, small
    ])
    _shard(run, 30, "B", "Rollout/0", [])
    _shard(run, 40, "A", "Rollout/1", [])
    # THEN each is named by what moved it
    assert _transports(run) == {
        "Rollout/1 -> driver : small": {"rpc": 1},
        "Rollout/1 -> driver : big": {"shm": 1},
        "Rollout/0 -> driver : far": {"net": 1},
        "driver -> object_store : put": {"shm": 1},
        "Rollout/0 -> Trainer/0 : absorb": {"net": 1},
        "Rollout/1 -> Trainer/0 : near": {"shm": 1},
        "driver -> Trainer/0 : train": {"rpc": 1},
    }


def test_a_run_without_ray_processes_keeps_its_labels(tmp_path):
    run = tmp_path / "run"
    _shard(run, 10, None, None, [("a", "b", "big", 200 * KIB, "rpc"), ("a", "b", "m", 8 * KIB, "shm")])
    assert _transports(run) == {"a -> b : big": {"rpc": 1}, "a -> b : m": {"shm": 1}}


def test_a_driver_that_did_not_say_where_it_runs_is_placed_in_its_own_process(tmp_path):
    # GIVEN an actor that said where it runs (it records the driver's calls: src driver), and
    # a driver connected before tracing began, which said nothing (it records the results)
    run = tmp_path / "run"
    _shard(run, 20, "A", "Rollout/1", [("driver", "Rollout/1", "generate", 8, "rpc")])
    _shard(run, 10, None, None, [("Rollout/1", "driver", "generate", 4 * KIB, "rpc")])
    owners = flowmap.load(str(run)).view.owners
    # THEN each is in its own process, not in the process that recorded its hops
    assert (owners["driver"].pids, owners["Rollout/1"].pids) == ((10,), (20,))
