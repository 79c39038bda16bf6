"""Set-up: scripts that want different extras do not reinstall each other's every time they alternate.

`scripts/demo.sh` sets up with `dev`, `scripts/test.sh` with `dev,integrations`. A venv that holds
the union satisfies both, so alternating them must not run pip again. The venv's python here is a
recorder of its own arguments (pip is not the thing under test: the stamp logic of setup.sh is).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tree(tmp_path):
    """A copy of what setup.sh reads, with a venv whose python logs each call."""
    os.makedirs(tmp_path / "scripts")
    shutil.copy(os.path.join(REPO, "scripts", "setup.sh"), tmp_path / "scripts")
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy(os.path.join(REPO, name), tmp_path)
    for folder in (("capture",), ("capture", "describers"), ("writer",), ("discover",)):
        os.makedirs(tmp_path.joinpath("flowmap", *folder), exist_ok=True)
        for c in glob.glob(os.path.join(REPO, "flowmap", *folder, "*.c")):
            shutil.copy(c, tmp_path.joinpath("flowmap", *folder))
    os.makedirs(tmp_path / ".venv" / "bin")
    py = tmp_path / ".venv" / "bin" / "python"
    py.write_text('#!/bin/sh\necho "$*" >> "$(dirname "$0")/../calls.log"\n')
    py.chmod(0o755)
    return tmp_path


def _setup(tree, extras: str) -> None:
    env = {**os.environ, "FLOWMAP_EXTRAS": extras, "PATH": os.environ["PATH"]}
    r = subprocess.run(["bash", str(tree / "scripts" / "setup.sh")], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _installs(tree) -> list[str]:
    log = (tree / ".venv" / "calls.log").read_text().splitlines()
    return [line for line in log if line.startswith("-m pip install") and "-e" in line.split()]


def test_alternating_extras_installs_once_and_keeps_the_union(tmp_path):
    tree = _tree(tmp_path)
    _setup(tree, "dev,integrations")   # test.sh
    _setup(tree, "dev")                # demo.sh
    _setup(tree, "dev,integrations")   # test.sh again
    _setup(tree, "integrations,dev")   # the same set, written in another order
    assert len(_installs(tree)) == 1, _installs(tree)


def test_an_extra_not_installed_yet_installs_the_union(tmp_path):
    tree = _tree(tmp_path)
    _setup(tree, "dev")
    _setup(tree, "bench")
    installs = _installs(tree)
    assert len(installs) == 2
    # the second install keeps what the first brought: dev and bench together
    assert ".[bench,dev]" in installs[1].split()
    _setup(tree, "dev")
    assert len(_installs(tree)) == 2
