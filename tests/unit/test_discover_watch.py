"""The discovery hook on real code in this process: what it counts, describes, skips, keeps."""

from __future__ import annotations

import gc
import importlib
import json
import sys
import textwrap
import weakref

import pytest

torch = pytest.importorskip("torch")

from flowmap.capture.describe import describe  # noqa: E402
from flowmap.discover import Budget, Filters, Watcher  # noqa: E402
from flowmap.discover.process import snapshot, step_targets  # noqa: E402

PIPE = """
import json
from dataclasses import dataclass

import torch
import flowmap


@dataclass
class Batch:
    ids: torch.Tensor
    rewards: torch.Tensor


def make(n):
    return Batch(torch.zeros(n, 8, dtype=torch.int64), torch.ones(n))


def scale(x: float, y: int) -> float:      # scalars only: never a candidate
    return x * y


def consume(batch, note):
    json.dumps({"n": note})                 # stdlib: never watched
    return scale(1.5, 2)


class Buffer:
    def put(self, batch):
        return self._store(batch)           # the same object's method, its result as is

    def _store(self, batch):
        return batch.ids[:2]                # a view: the storage it was given


def loop(steps):
    for s in range(steps):
        flowmap.step(s)
        consume(make(4), "x")
"""


@pytest.fixture
def pipe(tmp_path, monkeypatch):
    name = f"disc_pipe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PIPE))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(name)
    yield mod
    sys.modules.pop(name, None)


def watch(fn, *, filters=None, budget=None):
    w = Watcher(filters or Filters(), budget or Budget(None, None, None), step_targets())
    w.start()
    try:
        fn()
    finally:
        w.stop()
    return w, snapshot(w)


def test_counts_and_bytes_match_describe_and_skip_scalars_and_stdlib(pipe):
    # WHEN three batches of 4 pass through make -> consume
    w, rec = watch(lambda: pipe.loop(3))
    fns = rec["functions"]
    make, consume = fns[f"{pipe.__name__}:make"], fns[f"{pipe.__name__}:consume"]
    # THEN each is counted once per call, with describe's own byte figures
    one = pipe.make(4)
    assert make["stats"]["calls"] == consume["stats"]["calls"] == 3
    assert make["stats"]["result_bytes"] == 3 * describe(one).nbytes == 3 * (4 * 8 * 8 + 4 * 4)
    assert consume["stats"]["call_bytes"] == 3 * describe({"batch": one}).nbytes
    assert consume["stats"]["args"] == {"batch": 3}  # `note` (a str) carried no data
    assert make["target"] == f"{pipe.__name__}:make"
    # the scalar helper carried nothing (no record); json was never watched at all
    assert w.calls > 9 and f"{pipe.__name__}:scale" not in fns
    assert not any(k.startswith("json") for k in fns)
    assert sorted(rec["steps"]) == [0, 1, 2]
    json.dumps(rec)  # a record is plain JSON


def test_no_payload_outlives_its_call(pipe):
    # GIVEN a tensor handed to a watched function
    seen = []

    def run():
        t = torch.ones(16)
        seen.append(weakref.ref(t))
        pipe.consume(pipe.Batch(t, t), "y")
        del t

    w = Watcher(Filters(), Budget(None, None, None))
    w.start()
    try:
        run()
        gc.collect()
        # THEN it is gone while watching goes on: the watcher kept no reference
        assert seen[0]() is None
    finally:
        w.stop()
    assert w.infos()


def test_steps_budget_stops_watching(pipe):
    # WHEN the budget is 2 steps of a 5-step loop
    w, rec = watch(lambda: pipe.loop(5), budget=Budget(None, None, 2))
    # THEN watching stopped as the third step began
    assert rec["steps"] == [0, 1]
    assert rec["stop_reason"] == "--steps 2 reached"
    assert rec["functions"][f"{pipe.__name__}:make"]["stats"]["calls"] == 2
    assert sys.getprofile() is None


def test_calls_budget_stops_watching(pipe):
    w, rec = watch(lambda: pipe.loop(5), budget=Budget(None, 4, None))
    assert rec["stop_reason"] == "--calls 4 reached"
    assert rec["calls"] == 4


def test_exclude_and_include_narrow_the_search(pipe):
    _, rec = watch(lambda: pipe.loop(1), filters=Filters(exclude=(pipe.__name__,)))
    assert not any(k.startswith(pipe.__name__) for k in rec["functions"])
    _, rec = watch(lambda: pipe.loop(1), filters=Filters(include=(pipe.__name__,)))
    assert rec["functions"] and all(k.startswith(pipe.__name__ + ":")
                                    for k in rec["functions"])


def test_a_nested_call_records_its_enclosing_calls_and_flags(pipe):
    from flowmap.discover.record import NOTHING_NEW, SAME_SELF, SHARES

    # WHEN put(batch) hands the batch to its own object's _store, which returns a view of it
    def run():
        buf = pipe.Buffer()
        for _ in range(3):
            buf.put(pipe.make(2))

    _, rec = watch(run, filters=Filters(include=(pipe.__name__,)))
    store = rec["functions"][f"{pipe.__name__}:Buffer._store"]["stats"]
    # THEN _store's one context is put: same object, shared storage, nothing new returned
    assert store["contexts"] == [[[[f"{pipe.__name__}:Buffer.put",
                                    SAME_SELF | SHARES | NOTHING_NEW]], 3]]
    # and put returned _store's result unchanged, every time
    assert store["delegated_to"] == {f"{pipe.__name__}:Buffer.put": 3}


def test_the_watch_reads_the_same_with_and_without_its_c_relay(pipe, monkeypatch):
    # GIVEN the same loop watched with the C relay in front of the hook (where built), then
    # with the Python hook alone
    from flowmap.discover import hooks

    built = hooks.crelay is not None and sys.version_info < (3, 12)
    with_relay, rec = watch(lambda: pipe.loop(3))
    monkeypatch.setattr(hooks, "crelay", None)
    alone, rec_alone = watch(lambda: pipe.loop(3))
    # THEN every function's figures are the same
    assert with_relay.hook is not None and alone.hook is not None
    assert (with_relay.hook.relay is not None) == built and alone.hook.relay is None
    assert rec["functions"].keys() == rec_alone["functions"].keys()
    for key, fn in rec["functions"].items():
        assert fn["stats"] == rec_alone["functions"][key]["stats"], key
    assert rec["steps"] == rec_alone["steps"] and rec["calls"] == rec_alone["calls"]
