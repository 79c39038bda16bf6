"""The field gallery (examples/field/): each bug's script, traced, gets its finding with the bytes at stake.

Each script reproduces a data-movement bug an RL framework reported (the
script's docstring cites it). The test runs it under `flowmap trace` in a fresh
interpreter and checks the finding's kind, seams and bytes at stake per step
against a figure computed here from the script's sizes, by hand.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import flowmap
from flowmap.findings import findings

FIELD = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "field")
INT32, INT64, FLOAT32, BOOL = 4, 8, 4, 1


def _findings(tmp_path, script: str, kind: str) -> list:
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", str(out),
                           os.path.join(FIELD, script)], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return [f for f in findings(flowmap.load(str(out)).view) if f.kind == kind]


def test_view_of_a_large_storage(tmp_path):
    (f,) = _findings(tmp_path, "view_storage.py", "view")
    rows, cols = 1024, 1024
    # each step a fresh 4 MiB block goes to shared memory for its 4 KiB row
    assert f.bytes_per_step == (rows * cols - cols) * FLOAT32
    assert f.seams == ["actor -> learner : Tensor"] and ".clone()" in f.message


def test_padding_counted_from_the_mask(tmp_path):
    (f,) = _findings(tmp_path, "padding.py", "padding")
    b, t, layers, topk = 4, 256, 4, 8
    real = 40 + 100 + 64 + 20
    masked = b * t * INT64 + b * t * BOOL + b * t * layers * topk * INT32  # ids, mask, experts
    assert f.bytes_per_step == pytest.approx(masked * (1 - real / (b * t)))
    assert f.seams == ["rollout -> trainer : replay_batch"] and "cu_seqlens" in f.message


def test_duplicate_batch_to_every_rank(tmp_path):
    (f,) = _findings(tmp_path, "duplicate.py", "duplicate")
    ranks, batch = 4, 16 * 128 * 4 * 8 * INT32
    assert f.bytes_per_step == (ranks - 1) * batch
    assert len(f.seams) == ranks


def test_chatty_weight_sync(tmp_path):
    (f,) = _findings(tmp_path, "chatty.py", "chatty")
    params, cost = 48, 64 * 1024  # 48 KiB of parameters fit one bucket
    assert f.bytes_per_step == (params - 1) * cost
    assert f.seams == ["trainer -> rollout : dict"] and "48 messages per step" in f.message


def test_driver_funnel_pass_through(tmp_path):
    (f,) = _findings(tmp_path, "pass_through.py", "pass_through")
    assert f.bytes_per_step == 32 * 512 * INT64 + 32 * 512 * FLOAT32
    assert "driver" in f.message and "handle" in f.message


def test_prefix_resent_every_turn(tmp_path):
    (f,) = _findings(tmp_path, "prefix_resend.py", "prefix_resend")
    turn, turns, row = 64, 4, 4 * 8 * INT32  # tokens per turn, turns, bytes per token
    resent = sum(k * turn for k in range(1, turns)) * row  # turns 1..3 sent again
    assert f.bytes_per_step == resent
    assert f.seams == ["engine -> agent_loop : turn_output"] and "new rows" in f.message


def test_stale_drop_through_a_queue(tmp_path):
    (f,) = _findings(tmp_path, "stale_drop.py", "dropped")
    steps, per_step = 3, 8
    wire = 0
    for step in range(steps):
        for i in range(0, per_step, 4):  # one in four is stale
            traj = {"uid": step * per_step + i, "version": step - 1,
                    "tokens": np.zeros(512, dtype=np.int64)}
            wire += len(pickle.dumps(traj, protocol=pickle.DEFAULT_PROTOCOL))
    assert f.bytes_per_step == pytest.approx(wire / steps)
    assert "6 items" in f.message


def test_wide_expert_ids(tmp_path):
    (f,) = _findings(tmp_path, "wide_ids.py", "wide_ids")
    leaf = 128 * 4 * 8 * INT32
    assert f.bytes_per_step == leaf * 3 / 4  # int32 -> uint8
    assert "uint8" in f.message and f.seams == ["rollout -> trainer : replay"]


ZMQ_TAGGED = '''
import sys, zmq, flowmap
with flowmap.tracing(sys.argv[1]):
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL); port = pull.bind_to_random_port("tcp://127.0.0.1")
    push = ctx.socket(zmq.PUSH); push.connect(f"tcp://127.0.0.1:{port}")
    flowmap.set_owner("driver")
    for uid in (5, 6):
        push.send_pyobj(flowmap.tag_items({"uid": uid, "tokens": list(range(1000))}, [uid]))
    with flowmap.owner("learner"):
        pull.recv_pyobj(); pull.recv_pyobj()
        flowmap.drop([6], reason="stale")
    push.close(); pull.close(); ctx.term()
'''


def test_items_tagged_on_zmq_messages_give_a_drop_its_bytes(tmp_path):
    pytest.importorskip("zmq")
    proc = subprocess.run([sys.executable, "-c", ZMQ_TAGGED, str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    view = flowmap.load(str(tmp_path / "run")).view
    (dropped,) = [f for f in findings(view) if f.kind == "dropped"]
    sent = {h.items: h.nbytes for h in view.events.hops}
    assert set(sent) == {(5,), (6,)} and dropped.bytes_per_step == sent[(6,)]
