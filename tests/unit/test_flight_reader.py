"""The Flight Recorder's entries as hops, on hand-built dumps in torch's JSON layout.

The real recorder is read in tests/integration/test_flight_recorder.py (gloo) and
tests/gpu/ (NCCL); here the dumps are written by hand so each case is one the
test chose: two recorders holding one collective, steps by creation time, gaps.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import flowmap
from flowmap.integrations.transports import flight


def entry(rid, seq, created, op="gloo:all_reduce", sizes=((1000,),), dtype="Float",
          thread=0):
    return {"record_id": rid, "collective_seq_id": seq, "pg_id": 0,
            "process_group": ["0", "default_pg"], "profiling_name": op,
            "input_sizes": [list(s) for s in sizes], "input_dtypes": [dtype] * len(sizes),
            "time_created_ns": created, "is_p2p": False, "thread_id": str(thread)}


def dump_of(entries):
    doc = {"pg_config": {"0": {"ranks": "[0, 1]"}}, "entries": entries}
    return lambda include, only_active: json.dumps(doc).encode()


def groups():
    """What the reader asks of c10d: this rank, and no live groups (labels from the dump)."""
    return SimpleNamespace(get_rank=lambda: 1, _world=SimpleNamespace(pg_names={}))


def test_steps_gaps_and_a_collective_both_recorders_hold(tmp_path):
    with flowmap.tracing(str(tmp_path / "run")):
        t0 = time.time_ns()
        both = [entry(0, 1, t0 + 10), entry(1, 2, t0 + 30, op="nccl:all_gather", dtype="BFloat16")]
        generic = dump_of(both + [entry(5, 6, t0 + 50, op="gloo:broadcast", sizes=((3,),))])
        reader = flight.Reader(groups(), lambda: "rank1",
                               [("cpu", generic), ("cuda", dump_of(both))])
        reader.start_wall_ns = t0
        reader.steps = [(0, None), (t0 + 20, 7), (t0 + 40, 8)]
        reader.read()
        reader.stopped = True
    run = flowmap.load(str(tmp_path / "run"))
    hops = sorted((h.src, h.dst, h.name, h.nbytes, h.step) for h in run.hops)
    # each collective once, on the step it was created in; the broadcast's root is taken
    # to be the group's first rank, so rank 1 receives it
    assert hops == [("group[0,1]", "rank1", "broadcast", 12, 8),
                    ("rank1", "group[0,1]", "all_gather", 2000, 7),
                    ("rank1", "group[0,1]", "all_reduce", 4000, None)]
    assert [leaf.device for h in run.hops if h.name == "all_gather" for leaf in h.leaves] == \
        ["cuda"]
    # record ids 2-4 were overwritten before the read: counted in the run's health
    assert reader.lost == 3
    assert any("dropped 3 collective(s)" in m for m in run.health.error_messages)


def test_an_entry_inside_a_call_the_wrapper_recorded_is_the_wrappers(tmp_path):
    import threading

    with flowmap.tracing(str(tmp_path / "run")):
        t0 = time.time_ns()
        me = threading.get_ident()
        reader = flight.Reader(groups(), lambda: "rank1", [("cpu", dump_of([
            entry(0, 1, t0 + 10, thread=me), entry(1, 2, t0 + 30, thread=me),
            entry(2, 3, t0 + 30, thread=me + 1), entry(3, 4, t0 + 60, thread=me)]))])
        reader.start_wall_ns = t0
        reader.windows.append([me, t0 + 5, t0 + 15])  # the wrapper's call around entry 0
        # a call still running when the ring is read: its entry is the wrapper's too
        reader.windows.append([me, t0 + 50, flight.OPEN])
        reader.read()
        reader.stopped = True
    run = flowmap.load(str(tmp_path / "run"))
    # entry 1 (no call around it) and entry 2 (another thread's) are the recorder's alone
    assert [(h.name, h.nbytes) for h in run.hops] == [("all_reduce", 4000)] * 2
    assert reader.lost == 0
