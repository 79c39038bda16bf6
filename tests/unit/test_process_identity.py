"""A shard names its process for good, and says what the process learns of itself later."""

from __future__ import annotations

import json
import os

import flowmap
from flowmap.capture import state
from flowmap.read import identity


def test_the_header_names_the_process_by_host_boot_namespace_and_start(tmp_path):
    path = str(tmp_path / "run")
    with flowmap.tracing(path, children=False):
        flowmap.hop("a", "b", {"x": 1}, name="n")
    (name,) = [n for n in os.listdir(path) if n.endswith(".flowmap.jsonl")]
    header = json.loads(open(os.path.join(path, name)).readline())
    assert header["pid"] == os.getpid() and header["host"] == os.uname().nodename
    assert header["boot_id"] == open("/proc/sys/kernel/random/boot_id").read().strip()
    assert header["pid_ns"] == os.stat("/proc/self/ns/pid").st_ino
    assert header["start_ticks"] == int(open("/proc/self/stat").read().rpartition(")")[2].split()[19])
    assert len(header["run_process"]) == 16


def test_an_owner_that_says_where_it_runs_gets_that_process(tmp_path):
    # GIVEN this process recording a hop *from* Rollout/1 (as a Ray driver records a result)
    # and saying that only the driver runs here
    path = str(tmp_path / "run")
    with flowmap.tracing(path, children=False):
        state.tracer.info("owner", "driver")
        state.tracer.info("ray_node_id", "5f1c")
        flowmap.hop("Rollout/1", "driver", {"x": 1}, name="generate")
        flowmap.hop("driver", "Trainer/0", {"x": 1}, name="train")
    view = flowmap.load(path).view
    (proc,) = view.health.processes
    assert (proc.owners, proc.ray_node, proc.os_pid) == (("driver",), "5f1c", os.getpid())
    # THEN the driver is placed here; Rollout/1, which did not say, keeps the old evidence
    assert view.owners["driver"].pids == (os.getpid(),)
    assert view.owners["driver"].hosts == (os.uname().nodename,)


def test_processes_that_share_a_pid_are_numbered_apart():
    a = {"host": "h", "pid": 1, "boot_id": "b", "pid_ns": 10, "start_ticks": 5, "t0_wall_ns": 1}
    b = {**a, "pid_ns": 11, "t0_wall_ns": 2}  # another container, also pid 1
    a2 = {**a, "t0_wall_ns": 3}  # a second shard of the first process
    c = {**a, "start_ticks": 9, "t0_wall_ns": 4}  # pid 1 reused on the first host
    pids = identity.run_pids([a, b, a2, c])
    assert pids[0] == pids[2] == 1 and len({pids[0], pids[1], pids[3]}) == 3
    assert all(p % identity.PID_SPAN == 1 for p in pids)
    assert identity.host_labels([a, b, c]) == {identity.host_key(a): "h#1", identity.host_key(b): "h#2"}
    old = {"host": "h", "pid": 1, "t0_wall_ns": 0}  # an older writer's header: by name and pid
    assert identity.run_pids([old, dict(old)]) == [1, 1]


def test_set_owner_says_where_the_owner_runs(tmp_path):
    # GIVEN a process that names itself `trainer` and only receives (nothing sent from it,
    # no counters: the old evidence placed it nowhere)
    path = str(tmp_path / "run")
    saved = state.default_owner, state.auto_owner
    try:
        with flowmap.tracing(path, children=False):
            flowmap.set_owner("trainer")
            flowmap.hop("rollout", "trainer", {"x": 1}, name="batch")
    finally:
        state.default_owner, state.auto_owner = saved
    view = flowmap.load(path).view
    assert view.owners["trainer"].pids == (os.getpid(),)
    assert view.health.processes[0].owners == ("trainer",)


def test_a_ray_workers_header_names_its_node_from_its_command_line(tmp_path):
    # GIVEN a process started as a raylet starts a worker (`--node-id=...` among its args)
    import subprocess
    import sys
    path = str(tmp_path / "run")
    code = ("import sys, flowmap\n"
            "with flowmap.tracing(sys.argv[1], children=False):\n"
            "    flowmap.hop('a', 'b', {'x': 1}, name='n')\n")
    subprocess.run([sys.executable, "-c", code, path, "--node-id=5f1cabc"], check=True, timeout=60)
    # THEN its process is on that node, without a word from the integration
    (proc,) = flowmap.load(path).view.health.processes
    assert proc.ray_node == "5f1cabc"
