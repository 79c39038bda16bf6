"""The live side names hosts where a run spans several: `top`'s health line and the status
sentence say which host a process ran on (issue 41: hosts shown everywhere)."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import runs
from rich.console import Console

import flowmap
from flowmap.live.screen import screen
from flowmap.live.status import CUT_SHORT, status
from flowmap.live.watch import Watch

DEAD_PID = 2 ** 22 + 12345  # above Linux's pid_max: never a running process


def _shard(run: Path, pid: int, host: str, *, clean: bool = True) -> None:
    w = runs.ShardWriter(str(run / f"h-{pid}-1.flowmap.jsonl"), pid)
    w.hop(10, "rollout", "learner", "batch", [runs.tensor("t", (4,))])
    w.close(20, clean=clean)
    path = run / f"h-{pid}-1.flowmap.jsonl"
    path.write_text(path.read_text().replace('"host":"testhost"', f'"host":"{host}"'))


def _top(run: Path) -> str:
    out = io.StringIO()
    Console(file=out, width=160).print(screen(Watch(str(run)).update(), width=160))
    return out.getvalue()


def test_top_counts_the_processes_of_each_host_where_there_are_several(tmp_path):
    run = tmp_path / "run"
    _shard(run, 7, "node-a")
    _shard(run, 8, "node-b")
    _shard(run, 9, "node-b")
    assert "3 processes traced on 2 hosts (node-a 1, node-b 2) · " in _top(run)


def test_top_says_nothing_of_hosts_on_one(tmp_path):
    run = tmp_path / "run"
    _shard(run, 7, "node-a")
    _shard(run, 8, "node-a")
    text = _top(run)
    assert "2 processes traced · " in text and "hosts" not in text


def test_a_cut_short_run_on_several_hosts_names_the_process_and_its_host(tmp_path):
    # GIVEN a process here that died with its shard open, and one elsewhere that closed its own
    run = tmp_path / "run"
    here = socket.gethostname()
    _shard(run, DEAD_PID, here, clean=False)
    _shard(run, 8, "elsewhere")
    s = status(flowmap.load(str(run)))
    # THEN the sentence says which process, on which host
    assert s.state == CUT_SHORT
    assert s.sentence == ("the run was cut short: 1 of 2 processes never closed their shard "
                          f"({DEAD_PID} on {here})")
