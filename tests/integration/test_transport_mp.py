"""multiprocessing and torch.multiprocessing queues and pipes, captured with no flowmap code.

Each program runs under `flowmap trace` in a fresh interpreter; its children
(fork, spawn, forkserver) are traced through the environment. Every byte
figure is checked against `len(pickle.dumps(...))` of the same object,
computed here, and every consumer checks it got exactly what was put.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import pytest
from plain_and_traced import run_both

import flowmap

MESSAGE = {"tokens": list(range(300)), "text": "x" * 120, "reward": 0.5}
REPLY = ["ok", 300]
SIMPLE = ("traj", 7, b"\x00" * 64)
BYTES = b"raw" * 50
RAW = bytes(range(256)) * 3

PROGRAM = '''
import multiprocessing as mp, sys, threading, flowmap

MESSAGE = {message!r}
REPLY = {reply!r}
SIMPLE = {simple!r}
RAW = {raw!r}


def learner(q, jq, sq, conn, simplex_reader):
    flowmap.set_owner("learner")
    assert q.get() == MESSAGE
    assert jq.get() == MESSAGE; jq.task_done()
    assert conn.recv() == REPLY
    conn.send(MESSAGE)
    assert simplex_reader.recv() == SIMPLE
    assert simplex_reader.recv_bytes() == RAW  # bytes the program serialised itself
    sq.put(SIMPLE)


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    q, jq, sq = ctx.Queue(), ctx.JoinableQueue(), ctx.SimpleQueue()
    here, there = ctx.Pipe()
    reader, writer = ctx.Pipe(duplex=False)
    p = ctx.Process(target=learner, args=(q, jq, sq, there, reader))
    p.start()
    flowmap.set_owner("driver")
    # a producer thread with its own owner: the queue's feeder thread must not lose it
    def produce():
        with flowmap.owner("rollout/0"):
            q.put(MESSAGE)
    t = threading.Thread(target=produce); t.start(); t.join()
    jq.put(MESSAGE); jq.join()
    here.send(REPLY)
    assert here.recv() == MESSAGE
    writer.send(SIMPLE)
    writer.send_bytes(b"--" + RAW + b"--", 2, len(RAW))
    assert sq.get() == SIMPLE
    p.join()
    assert p.exitcode == 0
'''


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def hops_by_seam(run):
    out: dict = {}
    for h in run.hops:
        out.setdefault(h.seam, []).append(h)
    return out


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_queues_and_pipes_are_hops_between_the_two_owners(tmp_path, run_cli, method):
    # GIVEN a program that moves messages through every kind of queue and pipe
    script = write(tmp_path / "prog.py", PROGRAM.format(message=MESSAGE, reply=REPLY,
                                                        simple=SIMPLE, raw=RAW))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script), method], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert run.health.tracer_errors == 0, run.health.error_messages
    seams = hops_by_seam(run)
    # THEN each message is one hop from the putting owner to the getting owner
    msg, reply, simple = (len(pickle.dumps(x)) for x in (MESSAGE, REPLY, SIMPLE))
    expected = {
        ("rollout/0", "learner", "dict"): msg,   # Queue, put from a thread's owner
        ("driver", "learner", "dict"): msg,      # JoinableQueue
        ("driver", "learner", "list"): reply,    # duplex Pipe
        ("learner", "driver", "dict"): msg,      # duplex Pipe, the other way
        ("driver", "learner", "tuple"): simple,  # one-way Pipe
        ("learner", "driver", "tuple"): simple,  # SimpleQueue
        ("driver", "learner", "bytes"): len(RAW),  # send_bytes of a slice, recv_bytes
    }
    assert {k: [h.nbytes for h in v] for k, v in seams.items()} == \
        {k: [v] for k, v in expected.items()}
    for h in run.hops:
        assert h.transport == "pickle" and h.wire_bytes == h.nbytes
    # and the payload is described, not just counted
    (q_hop,) = seams[("rollout/0", "learner", "dict")]
    assert {leaf.path: leaf.count for leaf in q_hop.leaves}["tokens[*]"] == 300


def test_an_untraced_consumer_gets_exactly_what_was_put(tmp_path):
    # GIVEN a traced producer whose spawned consumer is not traced (children=False)
    script = write(tmp_path / "prog.py", f'''
        import multiprocessing as mp, pickle, sys, flowmap

        def consume(q, conn):
            import multiprocessing.queues, multiprocessing.reduction
            # untraced: no tracer, and nothing of flowmap in multiprocessing
            assert not flowmap.is_tracing()
            assert multiprocessing.queues._ForkingPickler is multiprocessing.reduction.ForkingPickler
            got = q.get()
            conn.send_bytes(pickle.dumps(got))
            conn.send_bytes(pickle.dumps([conn.recv()]))  # not an echo of the very bytes

        if __name__ == "__main__":
            with flowmap.tracing(sys.argv[1], children=False):
                flowmap.set_owner("producer")
                ctx = mp.get_context("spawn")
                q = ctx.Queue(); a, b = ctx.Pipe()
                p = ctx.Process(target=consume, args=(q, b)); p.start()
                q.put({MESSAGE!r})
                a.send({BYTES!r})
                got = [pickle.loads(a.recv_bytes()), pickle.loads(a.recv_bytes())[0]]
                p.join()
            print(repr(got))
    ''')
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    # THEN the consumer got the very objects (compared by value and by pickle)
    got = eval(r.stdout.strip())  # noqa: S307 - our own program's repr
    assert got == [MESSAGE, BYTES]
    assert [pickle.dumps(g) for g in got] == [pickle.dumps(MESSAGE), pickle.dumps(BYTES)]
    # and the sends show, to an untraced receiver, and the raw bytes it sent back, from it
    run = flowmap.load(str(tmp_path / "run"))
    assert sorted((h.src, h.dst, h.name, h.nbytes) for h in run.hops) == sorted([
        ("producer", "(untraced)", "dict", len(pickle.dumps(MESSAGE))),
        ("producer", "(untraced)", "bytes", len(pickle.dumps(BYTES))),
        ("(untraced)", "producer", "bytes", len(pickle.dumps(MESSAGE))),
        ("(untraced)", "producer", "bytes", len(pickle.dumps([BYTES]))),
    ])


FAILURES = '''
import multiprocessing as mp, queue, sys
ctx = mp.get_context("spawn")
q = ctx.Queue()
out["get timeout"] = outcome(lambda: q.get(timeout=0.05))
out["get_nowait"] = outcome(q.get_nowait)
q.close()
out["put closed"] = outcome(lambda: q.put(1)).split(" ")[0]
a, b = ctx.Pipe()
b.close()
out["send broken"] = outcome(lambda: a.send("x" * 10))
out["recv eof"] = outcome(a.recv)
a.close()
out["send closed"] = outcome(lambda: a.send(1))
out["recv closed"] = outcome(a.recv)
r, w = ctx.Pipe(duplex=False)
out["recv on writer"] = outcome(w.recv)
out["unpicklable"] = outcome(lambda: r.send(lambda: 0)).split(":")[0]
sq = ctx.SimpleQueue(); sq.put([1, 2]); out["simple"] = sq.get()
'''


def test_failures_behave_exactly_as_without_flowmap(tmp_path, run_cli):
    # GIVEN timeouts, closed queues and connections, a broken pipe, an unpicklable object
    plain, traced, run = run_both(tmp_path, run_cli, FAILURES)
    # THEN the program sees the same exceptions, with the same messages, traced or not
    assert traced == plain
    assert plain["get timeout"] == "Empty: " and plain["send broken"].startswith("BrokenPipeError")
    assert run.health.tracer_errors == 0, run.health.error_messages
    # only the one message that went through was recorded
    assert [(h.name, h.nbytes) for h in run.hops] == [("list", len(pickle.dumps([1, 2])))]


def test_torch_multiprocessing_tensors_are_shm_hops(tmp_path, run_cli):
    pytest.importorskip("torch")
    # GIVEN tensors handed to a torch.multiprocessing spawn worker through a queue
    script = write(tmp_path / "tensors.py", '''
        import sys, torch, torch.multiprocessing as tmp, flowmap

        def learner(q, back):
            flowmap.set_owner("learner")
            batch = q.get()
            assert torch.equal(batch["x"], torch.arange(1000, dtype=torch.float32))
            assert batch["mask"].dtype == torch.bool and batch["mask"].shape == (10, 10)
            back.put(batch["x"].sum().item())

        if __name__ == "__main__":
            ctx = tmp.get_context("spawn")
            q, back = ctx.Queue(), ctx.Queue()
            p = ctx.Process(target=learner, args=(q, back)); p.start()
            flowmap.set_owner("rollout/0")
            q.put({"x": torch.arange(1000, dtype=torch.float32),
                   "mask": torch.ones(10, 10, dtype=torch.bool)})
            assert back.get() == 499500.0
            p.join(); assert p.exitcode == 0
    ''')
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    (batch,) = [h for h in run.hops if h.seam == ("rollout/0", "learner", "dict")]
    # THEN the tensors' bytes moved through shared memory; only handles were pickled
    assert batch.transport == "shm" and batch.nbytes == 1000 * 4 + 10 * 10 * 1
    assert batch.wire_bytes is not None and 0 < batch.wire_bytes < 1000
    (back,) = [h for h in run.hops if h.seam == ("learner", "rollout/0", "float")]
    assert back.transport == "pickle" and back.nbytes == len(pickle.dumps(499500.0))


def test_no_transport_mp_records_nothing(tmp_path, run_cli):
    script = write(tmp_path / "prog.py", PROGRAM.format(message=MESSAGE, reply=REPLY,
                                                        simple=SIMPLE, raw=RAW))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--no-transport", "mp", str(script),
                 "spawn"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert flowmap.load(str(tmp_path / "run")).hops == []


def test_an_unknown_transport_is_a_usage_error(tmp_path, run_cli):
    script = write(tmp_path / "prog.py", "print('ran')\n")
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--no-transport", "mp,nccl", str(script)],
                cwd=tmp_path)
    assert r.returncode == 2 and "ran" not in r.stdout
    assert r.stderr.strip().splitlines() == [
        "flowmap: --no-transport: unknown transport nccl; choose from dist, mp, zmq, cuda_ipc, queue or all"]


def test_a_queued_message_belongs_to_the_step_it_was_put_in(tmp_path, run_cli):
    # GIVEN puts each followed at once by the next step, before the feeder thread pickles
    script = write(tmp_path / "prog.py", '''
        import multiprocessing as mp, flowmap

        if __name__ == "__main__":
            q = mp.get_context("fork").Queue()
            for s in range(20):
                flowmap.step(s)
                q.put([s] * 1000)  # pickled later, in the queue's feeder thread
            flowmap.step(20)
            assert [q.get()[0] for _ in range(20)] == list(range(20))
    ''')
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    # THEN every hop carries the step of its put, not the step its feeder thread saw
    hops = [h for h in flowmap.load(str(tmp_path / "run")).hops if h.name == "list"]
    assert [h.step for h in sorted(hops, key=lambda h: h.t_ns)] == list(range(20))


def test_a_pool_s_tasks_and_results_are_the_submitting_owner_s(tmp_path, run_cli):
    # GIVEN map and apply_async called as `driver`, at step 3; the pool's own threads send the
    # tasks and take the results
    script = write(tmp_path / "prog.py", '''
        import multiprocessing as mp, flowmap

        def double(x):
            return [v * 2 for v in x]

        if __name__ == "__main__":
            with mp.get_context("spawn").Pool(2) as pool, flowmap.owner("driver"):
                flowmap.step(3)
                assert pool.map(double, [[1] * 100, [2] * 100], chunksize=1)[1][0] == 4
                assert pool.apply_async(double, ([3] * 100,)).get()[0] == 6
    ''')
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    hops = [h for h in flowmap.load(str(tmp_path / "run")).hops if h.name == "tuple"]
    # THEN the three tasks leave the driver, the three results come back to it, at step 3
    tasks = [h for h in hops if h.src == "driver"]
    results = [h for h in hops if h.dst == "driver"]
    assert len(tasks) == 3 and {h.dst.split("/")[0] for h in tasks} == {"pool"}
    assert len(results) == 3 and {h.src.split("/")[0] for h in results} == {"pool"}
    assert {h.step for h in tasks} == {3}


LIBRARY_PLUMBING = '''
import concurrent.futures, multiprocessing as mp
from multiprocessing.connection import Client, Listener
import flowmap


def square(x):
    return x * x


def serve(listener):
    with listener.accept() as conn:  # the authentication handshake: raw bytes both ways
        conn.send_bytes(conn.recv_bytes() + b"!")


if __name__ == "__main__":
    flowmap.set_owner("driver")
    with Listener(("127.0.0.1", 0), authkey=b"secret") as listener:
        p = mp.get_context("fork").Process(target=serve, args=(listener,))
        p.start()
        with Client(listener.address, authkey=b"secret") as conn:
            conn.send_bytes(b"ping")
            assert conn.recv_bytes() == b"ping!"
        p.join()
    with concurrent.futures.ProcessPoolExecutor(2) as pool:  # its wake-up pipe: raw bytes
        assert list(pool.map(square, range(4))) == [0, 1, 4, 9]
'''


def test_the_standard_library_s_own_raw_bytes_are_not_the_program_s_messages(tmp_path, run_cli):
    # GIVEN a Listener and Client that authenticate (a challenge and its answer, raw bytes
    # sent by multiprocessing.connection itself) and a process pool (whose wake-up pipe
    # sends empty bytes), and the program's own two raw messages
    script = write(tmp_path / "prog.py", LIBRARY_PLUMBING)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert run.health.tracer_errors == 0, run.health.error_messages
    raw = sorted(h.nbytes for h in run.hops if h.name == "bytes")
    # THEN the program's two messages are hops of raw bytes, and nothing of the handshake
    assert raw == [4, 5], [(h.seam, h.nbytes) for h in run.hops]
