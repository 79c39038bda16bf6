"""Threads and asyncio tasks handing data over through `queue.Queue` and `asyncio.Queue`,
captured with no flowmap call (flowmap/integrations/transports/thread_queue.py).

Each program runs under `flowmap trace` in a fresh interpreter. Byte figures are the
tensors' own (`numel * element_size`), computed here; every consumer checks what it got.
"""

from __future__ import annotations

import textwrap

import flowmap
from flowmap.model.flow import build_flow

THREADS = '''
import logging, logging.handlers, queue, threading, torch

q1, q2, lifo = queue.Queue(), queue.Queue(maxsize=2), queue.LifoQueue()
log = queue.Queue()  # drained by the standard library's listener thread
logging.getLogger("p").addHandler(logging.handlers.QueueHandler(log))
logging.getLogger("p").setLevel(logging.INFO)
listener = logging.handlers.QueueListener(log, logging.NullHandler())
listener.start()

def rollout():
    for i in range(4):
        logging.getLogger("p").info("step %d", i)  # the standard library's put: not a seam
        q1.put({"tokens": torch.full((4, 8), i), "logp": torch.randn(4, 8)})
    q1.put(None)

def collector():
    buf = []
    while (x := q1.get()) is not None:
        lifo.put(x); assert lifo.get() is x  # a hand-off within one thread: no hop
        buf.append(x)
        if len(buf) == 2:
            q2.put(list(buf)); buf.clear()
    q2.put(None)

got = []
def trainer():
    while (b := q2.get()) is not None:
        got.append(sum(float((t["logp"] * t["tokens"]).sum()) for t in b))

ts = [threading.Thread(target=f) for f in (rollout, collector, trainer)]
[t.start() for t in ts]; [t.join() for t in ts]
listener.stop()
assert len(got) == 2 and log.qsize() == 0
'''

OWNED = '''
import queue, threading, flowmap, torch

flowmap.set_owner("trainer")
q = queue.Queue()

def rollout():
    flowmap.set_owner("rollout")
    for i in range(3):
        traj = {"seqs": torch.zeros(2, 16, dtype=torch.int64) + i}
        flowmap.hop("rollout", "trainer", traj, name="traj")  # told by the program...
        q.put(traj)                                          # ...so the put is not a second hop
    with flowmap.owner("scorer"):
        q.put([0.5, 0.25])  # another owner's put in the same thread: a hop of its own

t = threading.Thread(target=rollout, name="rollout-thread"); t.start()
for _ in range(4):
    q.get()
t.join()
'''

TASKS = '''
import asyncio, torch

async def rollout(q):
    for i in range(4):  # a put awaited in a task of its own, as wait_for makes on 3.11
        item = {"tokens": torch.full((4, 8), i), "logp": torch.randn(4, 8)}
        await asyncio.wait_for(q.put(item), timeout=5)
    await q.put(None)

async def reward(qin, qout):
    while (x := await qin.get()) is not None:
        await qout.put({"tokens": x["tokens"], "logp": x["logp"], "score": x["logp"].mean(1)})
    await qout.put(None)

async def trainer(q):
    n = 0
    while (b := await asyncio.create_task(q.get())) is not None:  # a get in a task of its own
        n += 1
    return n

async def main():
    q1, q2 = asyncio.Queue(), asyncio.Queue(maxsize=2)
    got = await asyncio.gather(rollout(q1), reward(q1, q2),
                               asyncio.create_task(trainer(q2), name="learner"))
    assert got[2] == 4

asyncio.run(main())
assert asyncio.iscoroutinefunction(asyncio.Queue.get)
'''


def _trace(tmp_path, run_cli, program: str, *args: str):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(program))
    r = run_cli(["trace", *args, "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert run.health.tracer_errors == 0, run.health.error_messages
    return run


def _seams(run) -> dict[tuple[str, str, str], list[int]]:
    out: dict[tuple[str, str, str], list[int]] = {}
    for h in run.hops:
        out.setdefault(h.seam, []).append(h.nbytes)
    return out


ONE = 4 * 8 * 8 + 4 * 8 * 4  # tokens int64 [4, 8] + logp float32 [4, 8]


def test_threads_named_by_their_targets_hand_over_through_queues(tmp_path, run_cli):
    # GIVEN three threads of an uninstrumented script, linked by two queues
    run = _trace(tmp_path, run_cli, THREADS)
    # THEN each put the program made and another thread took is one `ref` hop between the
    # threads' targets, priced at the tensors' bytes; the sentinel None, the logging
    # handler's puts and the collector's own LIFO hand-off are none
    assert _seams(run) == {
        ("rollout", "collector", "dict"): [ONE] * 4,
        ("collector", "trainer", "list"): [2 * ONE] * 2,
    }
    assert {h.transport for h in run.hops} == {"ref"}
    # AND the collector regroups the rollout's tensors: the trainer's data is the rollout's
    flow = build_flow(run.hops)
    assert {(e.src, e.dst) for e in flow.edges} == {("rollout", "trainer")}


def test_a_hop_the_program_recorded_is_not_recorded_again_by_its_queue(tmp_path, run_cli):
    # GIVEN threads with owners that record their hand-off with flowmap.hop and then put it
    run = _trace(tmp_path, run_cli, OWNED)
    seams = _seams(run)
    # THEN the program's hop stands; the put of another owner's payload is a hop of its own
    assert set(seams) == {("rollout", "trainer", "traj"), ("scorer", "trainer", "list")}
    assert seams[("rollout", "trainer", "traj")] == [2 * 16 * 8] * 3
    assert len(seams[("scorer", "trainer", "list")]) == 1


def test_asyncio_tasks_named_by_their_coroutines_hand_over_through_queues(tmp_path, run_cli):
    # GIVEN three tasks of one event loop, one named by the program, whose puts and gets
    # partly run in tasks the standard library makes (wait_for, create_task)
    run = _trace(tmp_path, run_cli, TASKS)
    seams = _seams(run)
    # THEN the hand-offs are hops between the coroutines (the named task by its name)
    assert seams == {
        ("rollout", "reward", "dict"): [ONE] * 4,
        ("reward", "learner", "dict"): [ONE + 4 * 4] * 4,
    }
    # AND the reward stage's score is its own, the tokens and logp the rollout's, which the
    # reward stage used (it sends them on beside the score it made from them)
    flow = build_flow(run.hops)
    assert {(e.src, e.dst) for e in flow.edges} == {
        ("rollout", "learner"), ("reward", "learner"), ("rollout", "reward")}


def test_no_transport_queue_turns_it_off(tmp_path, run_cli):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(THREADS))
    r = run_cli(["trace", "--no-transport", "queue", "-o", str(tmp_path / "run"), str(script)],
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no hops were recorded" in r.stderr
