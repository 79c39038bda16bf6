"""Every process by its name, with no flowmap code in the program.

A pipeline of three processes (a rollout worker, a scorer, a learner) joined by
a Queue and a Pipe, traced by `flowmap trace` under each start method: three
nodes, each named by its target, and the scorer's small replies in a seam of
their own. Pool workers are named by their pool and number.
"""

from __future__ import annotations

import pickle
import textwrap

import pytest

import flowmap

TRAJECTORY = {"tokens": list(range(3000)), "logprobs": [0.5] * 500}
SCORE = ("score", 7, 0.25)
N = 4

PIPELINE = textwrap.dedent(f'''
    import multiprocessing as mp, sys

    TRAJECTORY = {TRAJECTORY!r}
    SCORE = {SCORE!r}


    def rollout_worker(trajectories):
        for _ in range({N}):
            trajectories.put(TRAJECTORY)
        trajectories.put(None)


    def scorer(trajectories, to_learner, scores):
        while (t := trajectories.get()) is not None:
            to_learner.put(t)
            scores.send(SCORE)  # a small reply beside the big payload
        to_learner.put(None)


    def learner(to_learner, scores):
        n = 0
        while to_learner.get() is not None:
            assert scores.recv() == SCORE
            n += 1
        assert n == {N}


    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        trajectories, to_learner = ctx.Queue(), ctx.Queue()
        receive, send = ctx.Pipe(duplex=False)
        procs = [ctx.Process(target=rollout_worker, args=(trajectories,)),
                 ctx.Process(target=scorer, args=(trajectories, to_learner, send)),
                 ctx.Process(target=learner, args=(to_learner, receive))]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
            assert p.exitcode == 0
''')


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_three_processes_are_three_nodes_named_by_their_targets(tmp_path, run_cli, method):
    # GIVEN a three-process pipeline that imports nothing of flowmap
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "pipeline.py", method], cwd=tmp_path,
                timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert run.health.tracer_errors == 0, run.health.error_messages
    # THEN each process is its own node, named by its target, and main stays out of it
    seams = {(h.src, h.dst, h.name) for h in run.hops}
    assert seams == {("rollout_worker", "scorer", "dict"), ("scorer", "learner", "dict"),
                     ("scorer", "learner", "tuple"),
                     ("rollout_worker", "scorer", "NoneType"),  # the end-of-stream marks
                     ("scorer", "learner", "NoneType")}
    # and the scorer's small replies are a seam of their own, with their own bytes
    replies = [h for h in run.hops if h.seam == ("scorer", "learner", "tuple")]
    assert [h.nbytes for h in replies] == [len(pickle.dumps(SCORE))] * N
    big = [h for h in run.hops if h.seam == ("rollout_worker", "scorer", "dict")]
    assert len(big) == N and all(h.nbytes == len(pickle.dumps(TRAJECTORY)) for h in big)
    # AND each child's shard header names it, whatever the start method (a spawned child's
    # interpreter boots before it knows its `Process`: its shard waits for the name), and the
    # run's processes are the main and its three children (the forkserver's server, which only
    # forks them, leaves no shard)
    assert sorted(str(s.process) for s in run.shards) == [
        "None", "learner", "rollout_worker", "scorer"]
    assert run.health.shards == 4
    by_pid = {s.pid: s.process for s in run.shards}
    assert {(by_pid[h.pid], h.src) for h in run.hops if h.src != "main"} == {
        ("rollout_worker", "rollout_worker"), ("scorer", "scorer")}


POOL = textwrap.dedent('''
    import multiprocessing as mp, os, sys


    def square(x):
        return x * x


    def twin(q):
        q.put(os.getpid())


    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        with ctx.Pool(2) as pool:
            assert pool.map(square, range(8)) == [x * x for x in range(8)]
        q = ctx.Queue()
        twins = [ctx.Process(target=twin, args=(q,)) for _ in range(2)]
        for p in twins:
            p.start()
        got = {q.get(), q.get()}
        for p in twins:
            p.join()
        assert got == {p.pid for p in twins}
''')


def test_pool_workers_by_pool_and_number_and_twins_never_merge(tmp_path, run_cli):
    (tmp_path / "pool.py").write_text(POOL)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "pool.py"], cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    owners = {h.src for h in run.hops} | {h.dst for h in run.hops}
    # the pool's workers are pool/0 and pool/1 (whichever took tasks), the main stays main
    assert "main" in owners
    assert {o for o in owners if o.startswith("pool")} <= {"pool/0", "pool/1"}
    assert any(o.startswith("pool/") for o in owners)
    # two processes of one target are two nodes
    twins = {h.src for h in run.hops if h.dst == "main" and h.name == "int"}
    assert twins == {"twin", "twin/1"}


PLAIN_FORKS = textwrap.dedent('''
    import multiprocessing as mp, os

    q = mp.get_context("fork").Queue()
    children = []
    for n in range(2):  # plain os.fork, no multiprocessing Process: two children of main
        pid = os.fork()
        if pid == 0:
            if n == 0:  # a child of a child (forked before the queue's feeder thread starts)
                grandchild = os.fork()
                if grandchild == 0:
                    q.put({"grandchild": 0})
                    q.close(); q.join_thread()
                    os._exit(0)
                os.waitpid(grandchild, 0)
            q.put({"child": n})
            q.close(); q.join_thread()
            os._exit(0)
        children.append(pid)
    got = [q.get() for _ in range(3)]
    for pid in children:
        os.waitpid(pid, 0)
    q.put("from main"); q.get()
''')


def test_plain_forks_are_named_by_parent_and_fork_order(tmp_path, run_cli):
    (tmp_path / "forks.py").write_text(PLAIN_FORKS)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "forks.py"], cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    senders = {h.pid: h.src for h in run.hops if h.name in ("dict", "str")}
    # THEN each child is its own node, named by its parent and its place in the fork order,
    # and the main process stays main: nothing merges with it
    assert sorted(senders.values()) == ["main", "main/fork0", "main/fork0/fork0", "main/fork1"]
    assert len(senders) == 4
    # AND each child's shard header carries that name (the main's was never set)
    names = {s.pid: s.process for s in run.shards}
    assert {names[pid] for pid, src in senders.items() if src != "main"} == {
        "main/fork0", "main/fork0/fork0", "main/fork1"}


LOADERS = textwrap.dedent('''
    import torch
    from torch.utils.data import DataLoader, Dataset, Subset


    class Squares(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return torch.full((3,), float(i * i))


    for batch in DataLoader(Subset(Squares(), range(6)), batch_size=2, num_workers=2):
        pass
    for batch in DataLoader([torch.ones(3) * i for i in range(4)], batch_size=2, num_workers=2):
        pass
''')


def test_data_loader_workers_by_the_scripts_dataset(tmp_path, run_cli):
    pytest.importorskip("torch")
    (tmp_path / "loaders.py").write_text(LOADERS)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--no-auto-seams", "loaders.py"],
                cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    senders = {h.src for h in run.hops if h.dst == "main"}
    # a worker is named after the Dataset the script wrote (torch's Subset unwrapped) and its
    # number; a plain list's loader by the DataLoader; never torch's `_worker_loop`
    assert senders == {"Squares/0", "Squares/1", "DataLoader/0", "DataLoader/1"}, senders
