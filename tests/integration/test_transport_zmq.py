"""pyzmq sockets between two processes, captured with no flowmap code.

The traced program starts its peer as a plain Python child (traced through
the environment, or with the environment cleaned: an untraced peer). Byte
figures are computed here from the messages themselves: frame lengths,
`len(pickle.dumps(obj, pickle.DEFAULT_PROTOCOL))`, `len(json.dumps(obj))`.
"""

from __future__ import annotations

import json
import os
import pickle
import sys

import pytest
from plain_and_traced import run_both

import flowmap

zmq = pytest.importorskip("zmq")

OBJ = {"prompt_ids": list(range(40)), "sampling": {"n": 4, "temperature": 1.0}}
JSON = {"request_id": "r-1", "tokens": [1, 2, 3]}
FRAMES = [b"header", b"p" * 5000]

PROGRAM = '''
import json, os, subprocess, sys, zmq, flowmap

OBJ, JSON, FRAMES = {obj!r}, {json_obj!r}, {frames!r}
role, transport, where = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = zmq.Context()


def endpoint(port):
    return f"ipc://{{where}}/sock-{{port}}" if transport == "ipc" else f"tcp://127.0.0.1:{{port}}"


if role == "engine":
    flowmap.set_owner("engine")
    pull = ctx.socket(zmq.PULL); pull.connect(endpoint(sys.argv[4]))
    assert pull.recv() == b"hello"
    assert pull.recv_multipart() == FRAMES
    assert pull.recv_pyobj() == OBJ
    assert pull.recv_json() == JSON
    rep = ctx.socket(zmq.REP); rep.connect(endpoint(sys.argv[5]))
    assert rep.recv_string() == "ping"
    rep.send_json(JSON)
    pull.close(); rep.close(); ctx.term()
    sys.exit(0)

flowmap.set_owner("driver")
push = ctx.socket(zmq.PUSH)
req = ctx.socket(zmq.REQ)
if transport == "ipc":
    push.bind(endpoint("push")); req.bind(endpoint("req")); ports = ("push", "req")
else:
    ports = (push.bind_to_random_port("tcp://127.0.0.1"), req.bind_to_random_port("tcp://127.0.0.1"))
env = dict(os.environ)
if os.environ.get("UNTRACED_PEER"):
    for k in ("FLOWMAP_RUN_DIR", "FLOWMAP_IMPORT_ROOT", "PYTHONPATH"):
        env.pop(k, None)
    env["PYTHONPATH"] = os.environ["UNTRACED_PEER"]  # import flowmap (not tracing) and zmq
peer = subprocess.Popen([sys.executable, __file__, "engine", transport, where, *map(str, ports)],
                        env=env)
push.send(b"hello")
push.send_multipart(FRAMES)
push.send_pyobj(OBJ)
push.send_json(JSON)
req.send_string("ping")
assert req.recv_json() == JSON
assert peer.wait(timeout=60) == 0
push.close(); req.close(); ctx.term()
'''


def expected_bytes() -> dict[str, int]:
    return {
        "hello": len(b"hello"),
        "frames": sum(len(f) for f in FRAMES),
        "pyobj": len(pickle.dumps(OBJ, pickle.DEFAULT_PROTOCOL)),
        "json": len(json.dumps(JSON).encode()),
        "ping": len(b"ping"),
    }


def trace_pair(tmp_path, run_cli, transport, *, untraced_peer=False):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.format(obj=OBJ, json_obj=JSON, frames=FRAMES))
    env = {}
    if untraced_peer:
        env["UNTRACED_PEER"] = os.pathsep.join(p for p in sys.path if p)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script), "driver", transport,
                 str(tmp_path)], cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert run.health.tracer_errors == 0, run.health.error_messages
    return run


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_push_pull_and_req_rep_between_two_traced_processes(tmp_path, run_cli, transport):
    # GIVEN a driver that PUSHes four messages and makes one REQ/REP call to its engine
    run = trace_pair(tmp_path, run_cli, transport)
    e = expected_bytes()
    hops = [(h.src, h.dst, h.name.split(" ")[0], h.nbytes) for h in run.hops]
    # THEN every message is one hop between the two owners, with its exact bytes
    assert sorted(hops) == sorted([
        ("driver", "engine", "PUSH", e["hello"]),
        ("driver", "engine", "PUSH", e["frames"]),
        ("driver", "engine", "PUSH", e["pyobj"]),
        ("driver", "engine", "PUSH", e["json"]),
        ("driver", "engine", "REQ", e["ping"]),
        ("engine", "driver", "REP", e["json"]),
    ])
    # named by the socket's type and endpoint (the sender's)
    names = {h.name for h in run.hops}
    scheme = "ipc://" if transport == "ipc" else "tcp://127.0.0.1:"
    assert all(n.split(" ")[1].startswith(scheme) for n in names)
    if transport == "tcp":  # a random port would make every run's seams new to `diff`/`check`
        assert all(n.endswith(":*") for n in names), names
    assert {h.transport for h in run.hops} == {"zmq"}
    # and send_pyobj's payload is described as the object, not as bytes
    (obj_hop,) = [h for h in run.hops if h.nbytes == e["pyobj"]]
    assert {leaf.path: leaf.count for leaf in obj_hop.leaves}["prompt_ids[*]"] == 40


def test_an_untraced_peer_is_served_unchanged(tmp_path, run_cli):
    # GIVEN the same exchange with an engine process that is not traced
    run = trace_pair(tmp_path, run_cli, "ipc", untraced_peer=True)
    assert len(run.shards) == 1
    e = expected_bytes()
    # THEN the engine got every message intact (it asserts so and exited 0), and the
    # driver's sends show to an untraced receiver, the reply from an untraced sender
    assert sorted((h.src, h.dst, h.nbytes) for h in run.hops) == sorted([
        ("driver", "(untraced)", e["hello"]), ("driver", "(untraced)", e["frames"]),
        ("driver", "(untraced)", e["pyobj"]), ("driver", "(untraced)", e["json"]),
        ("driver", "(untraced)", e["ping"]), ("(untraced)", "driver", e["json"]),
    ])


FAILURES = '''
import zmq
ctx = zmq.Context()
pull = ctx.socket(zmq.PULL); pull.bind("tcp://127.0.0.1:*")
pull.setsockopt(zmq.RCVTIMEO, 50)
out["recv timeout"] = outcome(pull.recv)
out["recv_multipart timeout"] = outcome(pull.recv_multipart)
out["recv_pyobj noblock"] = outcome(lambda: pull.recv_pyobj(zmq.NOBLOCK))
push = ctx.socket(zmq.PUSH); push.setsockopt(zmq.SNDTIMEO, 50)
out["send with no peer"] = outcome(lambda: push.send(b"x"))
out["send_json noblock"] = outcome(lambda: push.send_json({"a": 1}, zmq.NOBLOCK))
push.close()
out["send closed"] = outcome(lambda: push.send(b"x"))
out["send_multipart closed"] = outcome(lambda: push.send_multipart([b"a", b"b"]))
pull.close()
out["recv closed"] = outcome(pull.recv)
out["send str"] = outcome(lambda: ctx.socket(zmq.PUSH).send("text"))
ctx.destroy(linger=0)
'''


def test_timeouts_and_closed_sockets_behave_exactly_as_without_flowmap(tmp_path, run_cli):
    plain, traced, run = run_both(tmp_path, run_cli, FAILURES)
    assert traced == plain and plain["recv timeout"].startswith("Again")
    assert run.hops == [] and run.health.tracer_errors == 0


def test_no_transport_zmq_records_nothing(tmp_path, run_cli):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.format(obj=OBJ, json_obj=JSON, frames=FRAMES))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--no-transport", "zmq", str(script),
                 "driver", "tcp", str(tmp_path)], cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert flowmap.load(str(tmp_path / "run")).hops == []


PUBSUB = '''
import sys, time, zmq, flowmap
ctx = zmq.Context()
pub = ctx.socket(zmq.PUB); pub.bind(f"ipc://{sys.argv[1]}/pub")
subs = []
for i in range(2):
    s = ctx.socket(zmq.SUB); s.connect(f"ipc://{sys.argv[1]}/pub"); s.subscribe(b"")
    subs.append(s)
time.sleep(0.5)  # let the subscriptions reach the publisher
with flowmap.owner("weights"):
    pub.send_multipart([b"v1", b"w" * 3000])
for i, s in enumerate(subs):
    with flowmap.owner(f"rollout/{i}"):
        assert s.recv_multipart() == [b"v1", b"w" * 3000]
for s in (pub, *subs): s.close()
ctx.term()
'''


def test_a_published_message_is_one_hop_per_subscriber(tmp_path, run_cli):
    script = tmp_path / "pubsub.py"
    script.write_text(PUBSUB)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script), str(tmp_path)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert sorted((h.src, h.dst, h.nbytes) for h in run.hops) == [
        ("weights", "rollout/0", 2 + 3000), ("weights", "rollout/1", 2 + 3000)]


ROUTER_FRAME_BY_FRAME = '''
import pickle, zmq, flowmap

ctx = zmq.Context()
router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
port = router.bind_to_random_port("tcp://127.0.0.1")
dealer.connect(f"tcp://127.0.0.1:{port}")
for turn in range(3):
    with flowmap.owner("agent"):
        dealer.send_pyobj({"turn": turn})
    with flowmap.owner("engine"):
        ident = router.recv()  # the identity frame alone, then the request
        if turn == 0:  # a whole message sent meanwhile is not the request's rest
            router.send_multipart([ident, b"ack"])
        assert router.recv_pyobj() == {"turn": turn}
        router.send(ident, zmq.SNDMORE)  # as a ROUTER replies with send_pyobj
        router.send_pyobj({"reply": b"r" * (1000 * (turn + 1))})
    with flowmap.owner("agent"):
        if turn == 0:
            assert dealer.recv() == b"ack"
        assert dealer.recv_pyobj() == {"reply": b"r" * (1000 * (turn + 1))}
router.close(); dealer.close(); ctx.term()
'''


def test_a_router_message_begun_frame_by_frame_pairs_with_its_peer(tmp_path, run_cli):
    # GIVEN a ROUTER that receives and replies with its identity frame on its own, then
    # `recv_pyobj` / `send_pyobj`: one message each way, as the DEALER sees it; once, a whole
    # message sent between the identity and the rest of a request
    script = tmp_path / "router.py"
    script.write_text(ROUTER_FRAME_BY_FRAME)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    # THEN every message joins its receiver: no half goes to or comes from (untraced)
    request = len(pickle.dumps({"turn": 0}, pickle.DEFAULT_PROTOCOL))
    assert sorted((h.src, h.dst, h.nbytes) for h in run.hops) == sorted(
        [("agent", "engine", request)] * 3 + [("engine", "agent", 5 + 3)] + [
            ("engine", "agent", 5 + len(pickle.dumps({"reply": b"r" * (1000 * (t + 1))},
                                                    pickle.DEFAULT_PROTOCOL))) for t in range(3)])


ASYNC_RELAY = '''
import asyncio, torch, zmq, zmq.asyncio, flowmap

ctx, actx = zmq.Context(), zmq.asyncio.Context()
push, pull_out = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
apull, apush = actx.socket(zmq.PULL), actx.socket(zmq.PUSH)
port = apull.bind_to_random_port("tcp://127.0.0.1")
push.connect(f"tcp://127.0.0.1:{port}")
out = pull_out.bind_to_random_port("tcp://127.0.0.1")
apush.connect(f"tcp://127.0.0.1:{out}")


async def gateway():
    with flowmap.owner("gateway"):
        try:  # a receipt cancelled before anything came is no message
            await asyncio.wait_for(apull.recv_pyobj(), 0.05)
        except asyncio.TimeoutError:
            pass
        for step in range(4):
            waiting = asyncio.ensure_future(apull.recv_pyobj())  # before the frame: deferred
            await asyncio.sleep(0.05)
            with flowmap.owner("rollout"):
                push.send_pyobj({"ids": torch.randint(0, 9, (4, 256)), "logp": torch.randn(4, 256)})
            group = await waiting
            if step % 2:  # the frame there already: taken at once
                with flowmap.owner("rollout"):
                    push.send_pyobj({"ids": torch.randint(0, 9, (4, 256)), "logp": torch.randn(4, 256)})
                await asyncio.sleep(0.05)
                await apull.recv_pyobj()
            await apush.send_pyobj({"step": step, "groups": [group]})  # handed on, re-wrapped
            with flowmap.owner("learner"):
                pull_out.recv_pyobj()
        push.send_multipart([b"raw", b"frames"])
        assert await apull.recv_multipart() == [b"raw", b"frames"]

asyncio.run(gateway())
for s in (push, pull_out, apull, apush):
    s.close(linger=1000)
ctx.term(); actx.term()
'''


def test_an_asyncio_relay_knows_the_tensors_it_loaded(tmp_path, run_cli):
    # GIVEN a gateway on zmq.asyncio that awaits `recv_pyobj` (before the message came, and
    # after) and hands each group on, re-wrapped, to the learner
    script = tmp_path / "relay.py"
    script.write_text(ASYNC_RELAY)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    seams = sorted((h.src, h.dst) for h in run.hops)
    # THEN each message is one hop, joined to its receiver, none lost or counted twice
    assert seams == sorted([("rollout", "gateway")] * 6 + [("gateway", "learner")] * 4
                           + [("gateway", "gateway")]), seams
    # AND each receipt of a pickled group names the tensors it loaded, so the relay is seen
    groups = [h for h in run.hops if h.src == "rollout"]
    assert all(h.arrived is not None and len(h.arrived[1]) == 2 for h in groups)
    flow = run.view.flow
    assert ("rollout", "learner") in {(e.src, e.dst) for e in flow.edges}, flow.edges


RAW_FRAMES = '''
import pickle, numpy as np, zmq, flowmap

ctx = zmq.Context()
router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
port = router.bind_to_random_port("tcp://127.0.0.1")
dealer.connect(f"tcp://127.0.0.1:{port}")
pull = ctx.socket(zmq.PULL)
push = ctx.socket(zmq.PUSH)
push.connect(f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}")
for turn in range(3):
    with flowmap.owner("agent"):
        dealer.send_pyobj({"turn": turn})
    with flowmap.owner("engine"):
        ident, _ = router.recv_multipart()
        reply = {"ids": np.arange(64 * (turn + 1), dtype=np.int32)}
        router.send_multipart([ident, pickle.dumps(reply)])  # raw frames: lengths only
    with flowmap.owner("agent"):
        got = dealer.recv_pyobj()
        push.send_pyobj([got["ids"]])  # handed on as it came
    with flowmap.owner("trainer"):
        pull.recv_pyobj()
for s in (router, dealer, pull, push):
    s.close()
ctx.term()
'''


def test_raw_frames_a_receiver_loads_read_as_what_it_loaded(tmp_path, run_cli):
    # GIVEN an engine that replies with `pickle.dumps` frames, which the agent loads with
    # `recv_pyobj` and hands on to the trainer
    script = tmp_path / "raw.py"
    script.write_text(RAW_FRAMES)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    replies = sorted((h for h in run.hops if h.src == "engine"), key=lambda h: h.t_ns)
    # THEN each reply's leaves are the array the agent loaded, its length growing turn by turn
    assert [[(leaf.kind, leaf.shape) for leaf in h.leaves] for h in replies] == [
        [("ndarray", (64 * (t + 1),))] for t in range(3)]
    # AND the agent only handed the engine's arrays on
    assert ("engine", "trainer") in {(e.src, e.dst) for e in run.view.flow.edges}
