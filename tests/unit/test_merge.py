"""`flowmap merge`: shards from two hosts become one run on one timeline."""

from __future__ import annotations

import json

import pytest

import flowmap
from flowmap.errors import UsageError
from flowmap.read.merge import merge_runs


def write_shard(run_dir, host: str, pid: int, t0_mono_ns: int, t0_wall_ns: int, hop_us: int,
                **identity):
    run_dir.mkdir(parents=True, exist_ok=True)
    header = {"flowmap": "trace", "schema": 1, "pid": pid, "ppid": 1, "host": host, "argv": [],
              "process": None, "t0_mono_ns": t0_mono_ns, "t0_wall_ns": t0_wall_ns, **identity}
    lines = [header, ["s", 0, "a"], ["s", 1, "b"], ["s", 2, "x"], ["s", 3, "ref"],
             ["S", 0, []], ["h", hop_us, 0, 1, 2, 0, 8, [], None, None, 3, None],
             ["end", hop_us, {"events": 1, "errors": 0}]]
    (run_dir / f"{host}-{pid}-0000.flowmap.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines))


def test_shards_of_two_hosts_are_put_on_one_clock(tmp_path):
    # GIVEN host A (monotonic 1 s behind its wall clock) and host B (a different monotonic
    # epoch) whose hops happened 5 ms apart in wall-clock time
    wall = 1_700_000_000_000_000_000
    write_shard(tmp_path / "a", "hostA", 10, t0_mono_ns=1_000_000_000, t0_wall_ns=wall,
                hop_us=1_000)
    write_shard(tmp_path / "b", "hostB", 10, t0_mono_ns=9_000_000_000_000,
                t0_wall_ns=wall + 2_000_000, hop_us=4_000)
    # WHEN merged
    result = merge_runs([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"))
    # THEN both shards are there, B moved onto A's clock, and the hops are 5 ms apart
    assert (result.shards, result.aligned, result.reference_host) == (2, 1, "hostA")
    run = flowmap.load(str(tmp_path / "m"))
    a, b = run.hops
    # two processes, one per host, though both are pid 10: the run numbers them apart
    assert a.pid != b.pid and len(run.shards) == 2
    assert sorted((s.os_pid, s.host_label) for s in run.shards) == [(10, "hostA"), (10, "hostB")]
    assert b.t_ns - a.t_ns == 5_000_000
    assert json.loads((tmp_path / "m" / "run.json").read_text())["clock_reference_host"] == "hostA"


def test_merging_into_an_existing_run_is_refused(tmp_path):
    write_shard(tmp_path / "a", "h", 1, 0, 0, 0)
    with pytest.raises(UsageError, match="already holds a run"):
        merge_runs([str(tmp_path / "a")], str(tmp_path / "a"))


def test_the_cli_merges_and_names_the_next_command(tmp_path, run_cli):
    write_shard(tmp_path / "a", "h1", 1, 0, 10, 0)
    write_shard(tmp_path / "b", "h2", 2, 0, 20, 0)
    r = run_cli(["merge", "-o", str(tmp_path / "m"), str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.returncode == 0, r.stderr
    assert "merged 2 shards from 2 host(s)" in r.stderr and "flowmap report" in r.stderr
    r = run_cli(["merge", "-o", str(tmp_path / "m"), str(tmp_path / "a")])
    assert r.returncode == 2 and "already holds a run" in r.stderr


def test_hosts_alike_in_every_name_are_told_apart_and_aligned(tmp_path):
    # GIVEN two hosts whose process is pid 1 under one hostname, one kernel's boot id and
    # pid namespace (a header copied and edited, or containers sharing all of it), and host
    # B's clocks 5,000 s apart from A's; the hops happened 3 ms apart in wall-clock time
    wall = 1_700_000_000_000_000_000
    same = {"boot_id": "b00t", "pid_ns": 4026531836}
    write_shard(tmp_path / "a", "node", 1, t0_mono_ns=10**9, t0_wall_ns=wall, hop_us=1_000,
                start_ticks=100, **same)
    write_shard(tmp_path / "b", "node", 1, t0_mono_ns=5_000 * 10**9, t0_wall_ns=wall + 10**6,
                hop_us=3_000, start_ticks=200, **same)
    # WHEN merged
    result = merge_runs([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"))
    # THEN they are two hosts, B on A's clock, and two processes of pid 1
    assert (result.hosts, result.aligned) == (["node#1", "node#2"], 1)
    run = flowmap.load(str(tmp_path / "m"))
    a, b = run.hops
    assert b.t_ns - a.t_ns == 3_000_000 and a.pid != b.pid
    assert [(p.os_pid, p.host) for p in run.view.health.processes] == [(1, "node#1"), (1, "node#2")]


def test_one_host_recorded_twice_in_one_run_stays_one_host(tmp_path):
    # GIVEN one host's run with a pid reused by a later process (another start)
    same = {"boot_id": "b00t", "pid_ns": 4026531836}
    write_shard(tmp_path / "a", "node", 7, 10**9, 10**18, 1_000, start_ticks=1, **same)
    (tmp_path / "a" / "node-7-0000.flowmap.jsonl").rename(tmp_path / "a" / "node-7-0001.flowmap.jsonl")
    write_shard(tmp_path / "a", "node", 7, 2 * 10**9, 10**18 + 10**9, 1_000, start_ticks=9, **same)
    run = flowmap.load(str(tmp_path / "a"))
    # THEN one host, two processes of pid 7
    assert [(p.os_pid, p.host) for p in run.view.health.processes] == [(7, "node"), (7, "node")]
    assert len({h.pid for h in run.hops}) == 2


def _tensor_shard(run_dir, host, hops, wall):
    """pid 1 on `host`, recording `hops` as (src, dst, name, shape, storage)."""
    run_dir.mkdir(parents=True)
    names = sorted({x for h in hops for x in (*h[:3], h[2] + ".x")} | {"pickle", "float32", "cpu"})
    sid = {n: i for i, n in enumerate(names)}
    lines = [{"flowmap": "trace", "schema": 1, "pid": 1, "ppid": 0, "host": host, "argv": [],
              "process": None, "t0_mono_ns": 10**9, "t0_wall_ns": wall, "boot_id": host,
              "pid_ns": 1, "start_ticks": 1}, *[["s", i, n] for n, i in sid.items()]]
    for k, (src, dst, name, shape, storage) in enumerate(hops):
        nbytes = 4 * shape[0] * (shape[1] if len(shape) > 1 else 1)
        lines += [["S", k, [[sid[name + ".x"], "tensor", list(shape), sid["float32"], sid["cpu"], nbytes, 1, None]]],
                  ["h", 1000 * (k + 1), sid[src], sid[dst], sid[name], k, nbytes, [storage], k, None,
                   sid["pickle"], None]]
    (run_dir / f"{host}-1-0000.flowmap.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_merged_hosts_storages_are_not_taken_for_one_process(tmp_path):
    # GIVEN host A's pid 1 receiving an [8, 128] batch into `trainer`, and host B's pid 1
    # sending an unrelated [1024] tensor from `trainer`: both shards number their first
    # storage 0
    from flowmap.findings import findings
    _tensor_shard(tmp_path / "a", "node-a", [("rollout", "trainer", "batch", (8, 128), 0)], 10**18)
    _tensor_shard(tmp_path / "b", "node-b", [("trainer", "learner", "grad", (1024,), 0)],
                  10**18 + 10**6)
    merge_runs([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"))
    view = flowmap.load(str(tmp_path / "m")).view
    # THEN no pass-through: the two storages 0 are of two processes on two hosts (the leaves'
    # names differ, so only storage identity could match them)
    assert [f for f in findings(view) if f.kind == "pass_through"] == []
