"""A forked child never hangs on a lock or an import that another thread held at the fork.

Each case runs `fork_stress.py` under `flowmap trace`: three threads exercise one part
of capture in a loop while the main thread forks hundreds of times, with a plain
`os.fork` and with multiprocessing's `fork` start method. Every child must exit within
its watchdog (faulthandler dumps a hung child's stacks into the output, which the
assertion shows) and leave its `child_done` hop in the trace. The `first_hop` case holds
the describers' lazy import open in a thread while the main thread forks: before the
fork gate, its first child hung every time.
"""

from __future__ import annotations

import os
import re

import pytest
from seam_figures import seam_figures

STRESS = os.path.join(os.path.dirname(__file__), "fork_stress.py")
FORKS = {"os": 200, "mp": 100}  # a multiprocessing child costs ~3x an os.fork one
CASES = ["first_hop", "hop", "aggregate", "counter", "import_hook", "queue"]


# A multiprocessing queue re-arms its own locks only in multiprocessing's children (its
# after-fork hooks): a plain `os.fork` while a thread puts can hang in the standard library
# itself, flowmap or not. The queue case runs with multiprocessing's fork start method.
PAIRS = [(case, method) for case in CASES for method in sorted(FORKS)
         if (case, method) != ("queue", "os")]


@pytest.mark.slow
@pytest.mark.parametrize("case, method", PAIRS)
def test_a_child_forked_while_threads_are_inside_capture_exits(tmp_path, run_cli, case, method):
    run = tmp_path / "run"
    forks = 3 if case == "first_hop" else FORKS[method]  # one import to land in, once per process
    aggregate = ["--aggregate", "--detail-steps", "0"] if case == "aggregate" else []
    result = run_cli(["trace", "-o", str(run), *aggregate, STRESS, case, method, str(forks)],
                     cwd=tmp_path, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert re.search(r"^hangs 0$", result.stdout, re.M), out  # a hung child's stacks are in `out`
    assert f"forks {forks}" in result.stdout
    figures = seam_figures(run)
    assert figures[("forked", "parent", "child_done")]["hops"] == forks
