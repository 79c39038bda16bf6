"""The hook of this Python version (profile hook on 3.11, sys.monitoring on 3.12+), on numpy
arrays: no torch needed, so the same test runs under every interpreter flowmap supports."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy")

from flowmap.discover import Budget, Filters, Watcher  # noqa: E402
from flowmap.discover.process import snapshot, step_targets  # noqa: E402

LIB = """
import flowmap
import numpy as np


class Env:
    def reset(self, n):
        return {"obs": np.zeros((n, 4), dtype=np.float32)}

    def step(self, actions):
        return {"obs": np.ones((len(actions), 4), dtype=np.float32), "reward": np.ones(len(actions))}


def policy(batch):
    return np.zeros(batch["obs"].shape[0], dtype=np.int64)


def gen():
    yield np.zeros(3)  # a generator: never a candidate


def run(steps):
    env = Env()
    batch = env.reset(8)
    for s in range(steps):
        flowmap.step(s)
        batch = env.step(policy(batch))
        list(gen())
"""


@pytest.fixture
def lib(tmp_path, monkeypatch):
    name = f"hook_lib_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(LIB))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)
    sys.modules.pop(name, None)


def test_the_hook_sees_array_hand_overs_steps_and_stops(lib):
    w = Watcher(Filters(include=(lib.__name__,)), Budget(None, None, 3), step_targets())
    w.start()
    try:
        lib.run(5)
    finally:
        w.stop()
    fns = snapshot(w)["functions"]
    n = lib.__name__
    step = fns[f"{n}:Env.step"]["stats"]
    # three steps watched: step() got 3 action arrays of 8 int64, returned 8x4 float32 + 8 float64
    assert step["calls"] == 3
    assert step["call_bytes"] == 3 * 8 * 8
    assert step["result_bytes"] == 3 * (8 * 4 * 4 + 8 * 8)
    assert step["args"] == {"actions": 3}
    assert fns[f"{n}:policy"]["stats"]["candidate_calls"] == 3
    assert f"{n}:gen" not in fns
    assert sorted(w.steps) == [0, 1, 2] and w.stop_reason == "--steps 3 reached"
    if sys.version_info >= (3, 12):
        assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) is None  # tool id freed
    else:
        assert sys.getprofile() is None
