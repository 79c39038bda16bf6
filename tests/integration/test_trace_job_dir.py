"""A Ray Job's entrypoint: the run lands where the submitter finds it, and survives its
working directory being replaced.

`ray job submit --working-dir` runs `flowmap trace job.py` inside a directory Ray
unpacked, which the submitter never sees, and Ray may remove and unpack it again
while the job runs. Here the program does that to itself: it removes its working
directory and makes a new one at the same path (its cwd is then a deleted
directory, and `os.getcwd()` raises FileNotFoundError).
"""

from __future__ import annotations

import json
import os

import flowmap

JOB = """
import os, shutil, torch, flowmap
for step in range(3):
    flowmap.step(step)
    flowmap.hop("rollout", "trainer", {"x": torch.zeros(8, 128)}, name="batch")
here = os.getcwd()
shutil.rmtree(here)   # as Ray does when it unpacks the job's package again
os.makedirs(here)
"""


def _one_run(base):
    runs = [os.path.join(base, n) for n in os.listdir(base)]
    assert len(runs) == 1, runs
    return runs[0]


def test_the_exit_hook_survives_its_working_directory_vanishing(tmp_path, run_cli):
    # GIVEN a job whose working directory is removed and made again while it runs
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.py").write_text(JOB)
    # WHEN traced with no run directory named (so the run is inside that directory)
    r = run_cli(["trace", "job.py"], cwd=job)
    # THEN the exit hook neither crashes nor loses the run's description
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    run = _one_run(job / "flowmap-runs")
    assert f"run written to {run}\n" in r.stderr  # absolute: the relative path has no base
    meta = json.loads(open(os.path.join(run, "run.json")).read())
    assert meta["command"] == ["job.py"] and meta["exit_code"] == 0
    assert meta["finished_wall_ns"] > meta["started_wall_ns"] > 0
    assert flowmap.load(run).num_hops == 3  # the shard was written again as it closed


def test_flowmap_runs_puts_the_run_where_the_submitter_looks(tmp_path, run_cli):
    # GIVEN FLOWMAP_RUNS naming a directory outside the job's working directory
    job, runs = tmp_path / "job", tmp_path / "runs"
    job.mkdir()
    (job / "job.py").write_text(JOB)
    env = {"FLOWMAP_RUNS": str(runs)}
    # WHEN traced there
    r = run_cli(["trace", "job.py"], cwd=job, env=env)
    # THEN the run is under FLOWMAP_RUNS, named by its absolute path, and found by default
    assert r.returncode == 0, r.stderr
    run = _one_run(runs)
    assert f"flowmap: run written to {run}\n" in r.stderr
    assert flowmap.load(run).num_hops == 3
    report = run_cli(["report", "--json"], cwd=tmp_path, env=env)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["run"] == run
