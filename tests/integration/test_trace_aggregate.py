"""`flowmap trace --aggregate` end to end: two traced processes folded equal to a full
trace of the same run, the options' usage errors, and SIGKILL durability of the
aggregates up to the last step boundary."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from seam_figures import detail_hops, read_run_shards, seam_figures, seam_steps

from flowmap import trace_format as tf

DRIVER = textwrap.dedent("""
    import os, subprocess, sys
    import numpy as np
    import flowmap

    here = os.path.dirname(os.path.abspath(__file__))
    workers = [subprocess.Popen([sys.executable, os.path.join(here, "worker.py"), mode])
               for mode in ("steps", "engine")]
    for s in range(9):
        flowmap.step(s)
        for i in range(5):
            n = 3 + (s * 5 + i * 2) % 11
            batch = {"obs": np.ones((n, 8), np.float32), "ids": [f"t{s}.{i}.{k}" for k in range(n)]}
            flowmap.hop("driver", "rollout/0", batch, name="batch", items=batch["ids"])
        flowmap.hop("trainer/0", "rollout/0", {"w": np.zeros(100, np.float16)}, name="weights",
                    version=s, transport="copy")
    for w in workers:
        assert w.wait() == 0
""")

WORKER = textwrap.dedent("""
    import sys
    import flowmap

    flowmap.set_owner("worker/0")
    if sys.argv[1] == "steps":
        for s in range(9):
            flowmap.step(s)
            for i in range(4 + s % 3):
                flowmap.hop("worker/0", "driver", {"grads": b"g" * (100 + 17 * i + s)},
                            name="grads", items=[i])
    else:  # an engine: never sees a step
        for i in range(1400):
            flowmap.hop("engine", "worker/0", [b"t" * (i % 9 + 1)] * (1 + i % 4), name="tokens")
""")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("agg")
    (d / "driver.py").write_text(DRIVER)
    (d / "worker.py").write_text(WORKER)
    from flowmap_cli import run_cli

    out = {}
    for name, extra in (("full", []), ("agg", ["--aggregate", "--detail-steps", "1"])):
        p = run_cli(["trace", "-o", str(d / name), *extra, str(d / "driver.py")], cwd=str(d))
        assert p.returncode == 0, p.stderr
        out[name] = str(d / name)
    return out


def test_two_processes_folded_equal_the_full_trace(runs):
    full, agg = seam_figures(runs["full"]), seam_figures(runs["agg"])
    assert set(full) == set(agg) and len(full) == 4
    for seam in full:
        assert agg[seam] == full[seam], seam
    folded = seam_steps(runs["agg"])
    assert {s.name for s in folded} == {"batch", "weights", "grads", "tokens"}
    assert {h.step for h in detail_hops(runs["agg"])} == {0, None}  # step 0; the engine's first
    engine = [s for s in folded if s.name == "tokens"]
    assert [s.step for s in engine] == [None] and engine[0].hops == 1400 - 1000


def test_run_json_says_the_run_was_aggregated(runs):
    meta = json.load(open(os.path.join(runs["agg"], tf.RUN_META)))
    assert meta["aggregate"] is True and meta["detail_steps"] == 1
    assert "aggregate" not in json.load(open(os.path.join(runs["full"], tf.RUN_META)))


@pytest.mark.parametrize("args, says", [
    (["--detail-steps", "2"], "--detail-steps goes with --aggregate"),
    (["--aggregate", "--detail-steps", "-1"], "a count of steps"),
])
def test_bad_options_are_one_sentence(tmp_path, run_cli, args, says):
    (tmp_path / "s.py").write_text("pass\n")
    p = run_cli(["trace", "-o", str(tmp_path / "run"), *args, str(tmp_path / "s.py")])
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr


CHILD = textwrap.dedent("""
    import os, sys
    from flowmap.capture import session
    import flowmap
    run_dir, ack_path = sys.argv[1], sys.argv[2]
    ack = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    session.start(run_dir, aggregate=1)
    s = 0
    while True:
        flowmap.step(s)  # the boundary: step s - 1's aggregates are written
        if s:
            os.write(ack, b"%d\\n" % (s - 1))
        for i in range(50 + s % 7):
            flowmap.hop("rollout/0", "trainer/0", b"x" * (10 + (s + i) % 17), name="batch",
                        items=[i, i + 1])
            flowmap.counter("depth", i)
        s += 1
""")


def _expected(s: int) -> tuple[int, int, int, int, int]:
    sizes = [10 + (s + i) % 17 for i in range(50 + s % 7)]
    return len(sizes), sum(sizes), min(sizes), max(sizes), 2 * len(sizes)


def test_every_completed_step_survives_sigkill(tmp_path):
    rng = random.Random(5)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    checked = 0
    for trial in range(4):
        run_dir, ack = tmp_path / f"run{trial}", tmp_path / f"ack{trial}"
        proc = subprocess.Popen([sys.executable, str(script), str(run_dir), str(ack)])
        deadline = time.monotonic() + 60  # past its detail window, however loaded the machine
        while time.monotonic() < deadline and (
            not ack.exists() or ack.read_bytes().count(b"\n") < 5
        ):
            time.sleep(0.02)
        time.sleep(rng.random() * 0.5)  # then a moment anywhere in a step
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        acked = [int(x) for x in open(ack, "rb").read().split(b"\n") if x.isdigit()]
        assert len(acked) >= 5, "the child did not get past its detail window"
        (shard,), _ = read_run_shards(str(run_dir))
        assert shard.truncated and shard.bad_lines == 0
        got = {s.step: (s.hops, s.nbytes_sum, s.nbytes_min, s.nbytes_max, s.num_items)
               for s in shard.seam_steps}
        assert len(got) == len(shard.seam_steps)  # one record per step
        assert [h.step for h in shard.hops] == [0] * 50  # the detail window, hop by hop
        counted = {c.step: (c.count, c.total) for c in shard.counter_folds}
        for s in acked[1:]:
            assert got.get(s) == _expected(s), f"trial {trial}: step {s}"
            n = 50 + s % 7
            assert counted.get(s) == (n, n * (n - 1) / 2), f"trial {trial}: step {s}"
        assert max(got) <= acked[-1] + 1  # at most the step that began at the kill
        checked += len(acked) - 1
    assert checked >= 16  # at least four folded steps checked per kill


def test_a_run_folded_from_its_first_hop_is_not_called_empty(tmp_path, run_cli):
    (tmp_path / "s.py").write_text("import flowmap\nfor i in range(5):\n"
                                   "    flowmap.hop('a', 'b', b'xy', name='n')\n")
    p = run_cli(["trace", "-o", str(tmp_path / "run"), "--aggregate", "--detail-steps", "0",
                 str(tmp_path / "s.py")])
    assert p.returncode == 0 and "no hops were recorded" not in p.stderr, p.stderr
    assert [(s.hops, s.nbytes_sum) for s in seam_steps(tmp_path / "run")] == [(5, 10)]


TRAINER = Path(__file__).resolve().parents[2] / "examples" / "grpo_tiny.py"


@pytest.mark.slow
@pytest.mark.skipif(not TRAINER.exists(), reason="needs examples/grpo_tiny.py")
def test_the_shipped_trainer_folded_equals_its_full_trace(tmp_path, run_cli):
    """Synchronous, so both runs do the same work: every seam's figures and shapes agree."""
    for name, extra in (("full", []), ("agg", ["--aggregate", "--detail-steps", "2"])):
        p = run_cli(["trace", "-o", str(tmp_path / name), *extra, str(TRAINER), "--steps", "6",
                     "--seed", "0", "--no-progress", "--set", "train.synchronous=true"],
                    timeout=300)
        assert p.returncode == 0, p.stderr
    full, agg = seam_figures(tmp_path / "full"), seam_figures(tmp_path / "agg")
    assert len(full) > 15 and set(agg) == set(full)
    for seam in full:
        assert agg[seam] == full[seam], seam
    assert {s.step for s in seam_steps(tmp_path / "agg")} >= set(range(2, 6))
    # what the outputs read, the queues between the driver and the ranks included
    full_seams, agg_seams = _per_seam(str(tmp_path / "full")), _per_seam(str(tmp_path / "agg"))
    assert len(full_seams) > len(full) and agg_seams == full_seams
    assert _counters(str(tmp_path / "agg")) == _counters(str(tmp_path / "full"))
    shards, _ = read_run_shards(str(tmp_path / "agg"))
    kinds = {type(h).__name__ for sh in shards for h in sh.halves}
    assert {"SendFold", "ReceiveFold"} <= kinds and any(sh.counter_folds for sh in shards)


def _counters(path: str) -> dict[str, tuple[int, float, float, float, float]]:
    import flowmap

    return {name: (c.count, c.min, c.max, round(c.mean, 9), c.last)
            for name, c in flowmap.load(path).view.counters.items()}


def _per_seam(path: str) -> dict[tuple[str, str, str], tuple[int, int, int, float, int]]:
    import flowmap

    view = flowmap.load(path).view
    return {k: (s.hops, s.total_bytes, s.max_bytes, round(s.bytes_per_step_mean, 6),
                s.bytes_per_step_max) for k, s in view.seams.items()}


def test_the_model_reads_folded_figures_equal_to_the_full_trace(runs):
    """What `report`, `render`, `check` and `diff` read: hops, bytes, largest hop, per step."""
    full, agg = _per_seam(runs["full"]), _per_seam(runs["agg"])
    assert len(full) == 4 and agg == full


def test_every_verb_reads_an_aggregated_run(runs, tmp_path, run_cli):
    agg, full = runs["agg"], runs["full"]
    report = run_cli(["report", agg, "--width", "100"])
    assert report.returncode == 0, report.stderr
    assert "detail window" in report.stdout
    doc = json.loads(run_cli(["report", agg, "--json"]).stdout)
    assert doc["detail"]["folded_hops"] > 0
    assert run_cli(["render", agg, "--html", str(tmp_path / "a.html")]).returncode == 0
    assert run_cli(["export", agg, "--perfetto", str(tmp_path / "a.json")]).returncode == 0
    assert run_cli(["baseline", full, "-o", str(tmp_path / "base.json")]).returncode == 0
    check = run_cli(["check", agg, "--baseline", str(tmp_path / "base.json")])
    assert check.returncode == 0, check.stdout + check.stderr
    diff = run_cli(["diff", full, agg, "--format", "json"])
    assert diff.returncode == 0, diff.stderr


QUEUES = textwrap.dedent("""
    import multiprocessing as mp, sys
    import flowmap

    STEPS = 7


    def worker(rank, tasks, shared, results, out):
        flowmap.set_owner(f"worker/{rank}")
        taken = 0
        while (task := tasks.get()) != "stop":  # a queue with one reader: this worker
            flowmap.step(task["step"])
            while shared.get() is not None:  # a queue both workers read; one None each
                taken += 1
            results.put({"rank": rank, "step": task["step"], "blob": b"r" * (40 + 3 * rank)})
        with open(out, "w") as f:
            f.write(str(taken))


    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        tasks = [ctx.Queue(), ctx.Queue()]
        shared, results = ctx.Queue(), ctx.Queue()  # results: two writers, one reader
        procs = [ctx.Process(target=worker, args=(r, tasks[r], shared, results,
                                                  f"{sys.argv[1]}.{r}")) for r in range(2)]
        for p in procs:
            p.start()
        flowmap.set_owner("driver")
        for s in range(STEPS):
            flowmap.step(s)
            for r in range(2):
                tasks[r].put({"step": s, "weights": list(range(10 + s))})
            for i in range(9):
                shared.put((i, "y" * (i + s)))
            shared.put(None)
            shared.put(None)
            assert sorted(results.get()["rank"] for _ in range(2)) == [0, 1]
        for r in range(2):
            tasks[r].put("stop")
        for p in procs:
            p.join()
            assert p.exitcode == 0
""")


def test_queue_halves_fold_and_join_by_count(tmp_path, run_cli):
    """Real multiprocessing queues: one reader, two writers, and one queue two workers
    share; every process folds its halves past its detail window."""
    (tmp_path / "queues.py").write_text(QUEUES)
    for name, extra in (("full", []), ("agg", ["--aggregate", "--detail-steps", "2"])):
        p = run_cli(["trace", "-o", str(tmp_path / name), *extra, str(tmp_path / "queues.py"),
                     str(tmp_path / f"{name}.taken")], timeout=120)
        assert p.returncode == 0, p.stderr
    shards, _ = read_run_shards(str(tmp_path / "agg"))
    assert len(shards) == 3 and all(
        {type(h).__name__ for h in sh.halves} & {"SendFold", "ReceiveFold"} for sh in shards)
    full, agg = _per_seam(str(tmp_path / "full")), _per_seam(str(tmp_path / "agg"))
    # queues with one reader: the tasks, the stop, the results from both workers
    exact = [(src, dst, name) for r in range(2)
             for src, dst, name in ((f"worker/{r}", "driver", "dict"),
                                    ("driver", f"worker/{r}", "dict"),
                                    ("driver", f"worker/{r}", "str"))]
    for k in exact:
        assert k in full and agg.get(k) == full[k], k
    # the shared queue: each worker's hops are what it counted taking, plus its 7 Nones;
    # the bytes sent add up
    for run, seams in (("full", full), ("agg", agg)):
        for r in range(2):
            taken = int((tmp_path / f"{run}.taken.{r}").read_text())
            got = [v[0] for (src, dst, name), v in seams.items()
                   if src == "driver" and dst == f"worker/{r}" and name in ("tuple", "NoneType")]
            assert sum(got) == taken + 7, run
    shared_bytes = {run: sum(v[1] for (src, _, name), v in seams.items()
                             if src == "driver" and name in ("tuple", "NoneType"))
                    for run, seams in (("full", full), ("agg", agg))}
    assert shared_bytes["agg"] == shared_bytes["full"]
    assert not any(k[1] == "(untraced)" or k[0] == "(untraced)" for k in agg)
    # the outputs say which queue's figures were shared out, and only that one
    doc = json.loads(run_cli(["report", str(tmp_path / "agg"), "--json"]).stdout)
    (channel,) = doc["detail"]["shared_channels"]
    assert channel.startswith("mp:") and "1 queue read by several owners" in doc["detail"]["note"]


RANKS = textwrap.dedent("""
    import torch
    import torch.distributed as dist
    import flowmap

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for s in range(6):
        flowmap.step(s)
        grads = torch.ones(100 + 10 * s)
        dist.all_reduce(grads)  # a collective: both ends known, folded as a hop
        n = 16 + 8 * ((s + rank) % 3)
        if rank == 0:  # p2p: a send half and a receive half, joined by their pair's channel
            dist.send(torch.ones(n, dtype=torch.float64), dst=1)
            dist.recv(torch.zeros(16 + 8 * ((s + 1) % 3), dtype=torch.float64), src=1)
        else:
            dist.recv(torch.zeros(16 + 8 * (s % 3), dtype=torch.float64), src=0)
            dist.send(torch.ones(n, dtype=torch.float64), dst=0)
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_torch_distributed_ranks_folded_equal_the_full_trace(tmp_path, run_cli):
    """Two gloo ranks under torchrun: collectives and p2p halves, folded past one step."""
    import socket

    (tmp_path / "ranks.py").write_text(RANKS)
    for name, extra in (("full", []), ("agg", ["--aggregate", "--detail-steps", "1"])):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        p = run_cli(["trace", "-o", str(tmp_path / name), *extra, "-m", "torch.distributed.run",
                     "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
                     str(port), str(tmp_path / "ranks.py")], cwd=str(tmp_path), timeout=240,
                    env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
        assert p.returncode == 0, p.stderr[-3000:]
    shards, _ = read_run_shards(str(tmp_path / "agg"))
    ranks = [sh for sh in shards if sh.seam_steps]
    assert len(ranks) == 2 and all(any(type(h).__name__ == "SendFold" for h in sh.halves)
                                   for sh in ranks)
    full, agg = _per_seam(str(tmp_path / "full")), _per_seam(str(tmp_path / "agg"))
    assert {k[2] for k in full} >= {"all_reduce", "send"} and agg == full


SOCKETS = textwrap.dedent("""
    import sys, time, zmq, flowmap
    where = sys.argv[1]
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)  # on two endpoints: its halves name only `zmq`
    pub.bind(f"ipc://{where}/a")
    pub.bind(f"ipc://{where}/b")
    subs = []
    for end in ("a", "b"):
        s = ctx.socket(zmq.SUB); s.connect(f"ipc://{where}/{end}"); s.subscribe(b"")
        subs.append(s)
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    push.bind(f"ipc://{where}/c"); pull.connect(f"ipc://{where}/c")
    time.sleep(0.5)  # let the subscriptions reach the publisher
    for step in range(6):
        flowmap.step(step)
        for i in range(3):
            with flowmap.owner("weights"):
                pub.send_multipart([b"v%d" % step, b"w" * (1000 + 100 * i + step)])
            with flowmap.owner("driver"):
                push.send_pyobj({"step": step, "prompt": list(range(10 + i))})
        for k, s in enumerate(subs):
            with flowmap.owner(f"rollout/{k}"):
                for i in range(3):
                    s.recv_multipart()
        with flowmap.owner("engine"):
            for i in range(3):
                pull.recv_pyobj()
    for s in (pub, push, pull, *subs):
        s.close()
    ctx.term()
""")


def test_zmq_halves_fold_and_join_by_count(tmp_path, run_cli):
    """PUB on two endpoints (fanned out to a SUB on each) and PUSH/PULL, past one step."""
    pytest.importorskip("zmq")
    (tmp_path / "sockets.py").write_text(SOCKETS)
    for name, extra in (("full", []), ("agg", ["--aggregate", "--detail-steps", "1"])):
        where = tmp_path / f"ipc-{name}"
        where.mkdir()
        p = run_cli(["trace", "-o", str(tmp_path / name), *extra, str(tmp_path / "sockets.py"),
                     str(where)], cwd=str(tmp_path), timeout=120)
        assert p.returncode == 0, p.stderr[-3000:]
    shards, _ = read_run_shards(str(tmp_path / "agg"))
    assert {type(h).__name__ for sh in shards for h in sh.halves} >= {"SendFold", "ReceiveFold"}
    full, agg = ({(src, dst, name.replace(str(tmp_path / f"ipc-{run}"), "IPC")): v
                  for (src, dst, name), v in _per_seam(str(tmp_path / run)).items()}
                 for run in ("full", "agg"))
    assert {(k[0], k[1]) for k in full} == {("weights", "rollout/0"), ("weights", "rollout/1"),
                                            ("driver", "engine")}
    assert agg == full
