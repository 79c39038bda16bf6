"""Set-up: the trainer extra brings numpy (torch warns without it); the bench cleans up."""

from __future__ import annotations

import os
import subprocess
import sys

import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_numpy_comes_with_torch_in_every_extra_that_has_torch():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["name"] == "flowmap-rl"
    for extra, deps in project["optional-dependencies"].items():
        names = {d.split("=")[0].split(">")[0].split("[")[0] for d in deps}
        if "torch" in names:
            assert "numpy" in names, extra


def test_bench_million_leaves_nothing_in_the_temp_directory(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(REPO, "bench", "bench_million.py"), "--hops", "2000"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "trace size" in r.stdout
    assert os.listdir(tmp_path) == []
