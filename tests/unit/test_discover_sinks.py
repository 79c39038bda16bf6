"""Discovery ranks out where data ends: a body that ignores its arguments, a metrics logger.

Told by the pattern, whatever the names: a disabled tracker's `log` that does
nothing (like a disabled wandb run's), a null writer taking `*args`, a metrics
recorder given only scalar tensors. Functions that really hand a payload over
stay seams, including one that returns nothing (a train step) and one that
ignores its argument but returns a payload (a buffer's `get(step)`).
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from flowmap.discover import Budget, Filters, Watcher, analyse  # noqa: E402
from flowmap.discover.process import snapshot, step_targets  # noqa: E402
from flowmap.discover.table import render  # noqa: E402

PROG = """
import torch
import flowmap


class NoopRun:                       # a tracker with logging turned off
    def log(self, data, step=None):
        pass


class NullWriter:
    def add_histogram(self, *args, **kwargs):
        return None


class Metrics:                       # keeps floats: only scalar tensors come in
    def __init__(self):
        self.history = []

    def record(self, values):
        self.history.append({k: float(v) for k, v in values.items()})


class Buffer:
    def __init__(self):
        self.items = []

    def put(self, batch):
        self.items.append(batch)

    def get(self, step):             # ignores its argument, returns a payload
        return self.items.pop()


class Learner:
    def __init__(self):
        self.w = torch.zeros(8)

    def train_step(self, batch):     # returns nothing, but uses what it is given
        self.w += batch["x"].float().mean(0)


def make(n):
    return {"x": torch.ones(n, 8), "reward": torch.ones(n)}


def loop(steps):
    run, writer, metrics, buf, learner = NoopRun(), NullWriter(), Metrics(), Buffer(), Learner()
    for s in range(steps):
        flowmap.step(s)
        buf.put(make(4))
        batch = buf.get(s)
        learner.train_step(batch)
        loss = batch["x"].sum()
        run.log({"loss": loss, "x": batch["x"]}, step=s)
        writer.add_histogram("x", batch["x"], s)
        metrics.record({"loss": loss, "reward": batch["reward"].mean()})
"""


@pytest.fixture
def prog(tmp_path, monkeypatch):
    name = f"sinks_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PROG))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)
    sys.modules.pop(name, None)


def test_sinks_are_ranked_out_by_their_pattern(prog):
    w = Watcher(Filters(), Budget(None, None, None), step_targets())
    w.start()
    try:
        prog.loop(3)
    finally:
        w.stop()
    found = analyse([snapshot(w)])
    n = prog.__name__
    seams = {c.fn.key for c in found.seams}
    sinks = {c.fn.key: c.fn.sink for c in found.sinks}
    assert {f"{n}:NoopRun.log", f"{n}:NullWriter.add_histogram", f"{n}:Metrics.record"} == set(sinks)
    assert sinks[f"{n}:NoopRun.log"] == "does nothing with its arguments"
    assert "metrics sink" in sinks[f"{n}:Metrics.record"]
    assert {f"{n}:Buffer.put", f"{n}:Buffer.get", f"{n}:Learner.train_step"} <= seams
    assert not seams & set(sinks)
    table = render(found)
    assert f"left out: {n}:NoopRun.log" in table
