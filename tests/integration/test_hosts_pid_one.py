"""Two hosts whose traced processes are both pid 1, merged: two hosts, two processes.

Each "host" is a real pid namespace (and UTS namespace, for its hostname) made
with `unshare`, so the program really runs as pid 1 — as a container's main
process does. Where namespaces cannot be made (not root, no unshare), the
test skips and says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import flowmap
from flowmap.read.merge import merge_runs
from flowmap.reporters import json_document
from flowmap.reporters.perfetto import perfetto_trace
from flowmap.reporters.terminal import report_lines

PROGRAM = """
import sys, torch, flowmap
me, peer = sys.argv[2], sys.argv[3]
with flowmap.tracing(sys.argv[1]):
    flowmap.set_owner(me)
    for step in range(3):
        flowmap.step(step)
        flowmap.counter("queue", step)
        flowmap.hop(me, peer, {"x": torch.zeros(8, 128)}, name="batch", transport="gloo")
"""


def _namespaces_work() -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare(1) here"
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--uts", "sh", "-c",
                        "hostname h && echo $$"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or r.stdout.strip() != "1":
        return f"cannot make a pid namespace here ({(r.stderr or r.stdout).strip()[:200]})"
    return None


def _trace_as_pid_one(run: str, hostname: str, me: str, peer: str) -> None:
    script = f"hostname {hostname} && exec {sys.executable} -c '{PROGRAM}' {run} {me} {peer}"
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--uts", "sh", "-c", script],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("names", [("node-a", "node-b"), ("same", "same")])
def test_two_pid_one_hosts_merge_into_two_hosts(tmp_path, names):
    why = _namespaces_work()
    if why:
        pytest.skip(why)
    # GIVEN two hosts, each tracing a process that is pid 1 there (equal hostnames, too)
    runs = [str(tmp_path / "a"), str(tmp_path / "b")]
    for run, name, me in zip(runs, names, ("rank0", "rank1")):
        _trace_as_pid_one(run, name, me, "rank1" if me == "rank0" else "rank0")
    assert [json.loads(open(os.path.join(r, n)).readline())["pid"]
            for r in runs for n in os.listdir(r) if n.endswith(".flowmap.jsonl")] == [1, 1]
    # WHEN merged
    result = merge_runs(runs, str(tmp_path / "m"))
    # THEN the merge counts two hosts, and the run names both, each with its own pid 1
    hosts = list(names) if names[0] != names[1] else ["same#1", "same#2"]
    assert sorted(result.hosts) == hosts
    run = flowmap.load(str(tmp_path / "m"))
    view = run.view
    assert list(view.health.hosts) == hosts
    assert [(p.os_pid, p.host) for p in view.health.processes] == [(1, h) for h in hosts]
    text = "\n".join(line for line, _ in report_lines(view, 120))
    assert f"hosts: {hosts[0]} (pid 1), {hosts[1]} (pid 1)" in text
    doc = json.loads(json_document.report(view, json_document.JsonOptions()))
    assert doc["hosts"] == hosts and len(doc["processes"]) == 2
    # and Perfetto has a process per host, each labelled with its host
    trace = perfetto_trace(view)
    labels = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e.get("ph") == "M" and e["name"] == "process_name"}
    assert sorted(labels.values()) == [f"rank0 (pid 1 on {hosts[0]})", f"rank1 (pid 1 on {hosts[1]})"]
    # each rank's hops lie on its own host's process
    drawn = {e["pid"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert drawn == set(labels)
    # and each owner is placed on its own host
    assert [(o.name, o.hosts) for o in view.owners.values()] == [("rank0", (hosts[0],)),
                                                                 ("rank1", (hosts[1],))]
