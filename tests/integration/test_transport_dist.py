"""torch.distributed under torchrun (gloo, 2 ranks on loopback), captured with no flowmap code.

Each rank writes the figures it expects, computed from the tensors themselves
(`nbytes`) and from `len(pickle.dumps(obj))`, next to the run; the test
compares every recorded hop against them.
"""

from __future__ import annotations

import importlib.util
import json
import socket

import pytest

import flowmap

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torchrun needs torch")

TRAIN = '''
import json, os, pickle, sys
import torch
import torch.distributed as dist
from torch.distributed import all_reduce  # bound by name before any call

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
sent, got = {}, {}   # what this rank's hops must say, per op

t = torch.ones(1000, dtype=torch.float32) * rank
all_reduce(t)
assert float(t[0]) == 1.0  # 0 + 1: the collective itself is untouched
sent["all_reduce"] = [t.nbytes]
h = dist.all_reduce(torch.ones(10, dtype=torch.float64), async_op=True)  # recorded at issue
h.wait()
sent["all_reduce"].append(10 * 8)

b = torch.full((300,), float(rank), dtype=torch.float64)
dist.broadcast(b, src=0)
assert float(b[0]) == 0.0
(sent if rank == 0 else got)["broadcast"] = [b.nbytes]

g = [torch.zeros(50, dtype=torch.int64) for _ in range(world)]
x = torch.full((50,), rank, dtype=torch.int64)
dist.all_gather(g, x)
sent["all_gather"] = [x.nbytes]
out = torch.zeros(world * 20)
inp = torch.ones(20)
dist.all_gather_into_tensor(out, inp)
sent["all_gather_into_tensor"] = [inp.nbytes]
rs_in = torch.ones(16 * world, dtype=torch.float32)
dist.reduce_scatter_tensor(torch.zeros(16), rs_in)
sent["reduce_scatter_tensor"] = [rs_in.nbytes]

with __import__("flowmap").owner("learner"):  # a role without instance: learner/rank<N>
    dist.all_reduce(torch.ones(3))
sent["learner:all_reduce"] = [12]

objs = [{"cfg": "x" * 100, "n": list(range(20))}, "hello"] if rank == 0 else [None, None]
dist.broadcast_object_list(objs, src=0)
assert objs[1] == "hello"
(sent if rank == 0 else got)["broadcast_object_list"] = [sum(len(pickle.dumps(o)) for o in objs)]
mine = {"rank": rank, "pad": "y" * (10 + 7 * rank)}
gathered = [None] * world
dist.all_gather_object(gathered, mine)
assert gathered[1]["rank"] == 1
sent["all_gather_object"] = [len(pickle.dumps(mine))]

p2p = {}
if rank == 0:
    a = torch.ones(64, dtype=torch.float16); dist.send(a, dst=1)
    c = torch.ones(32); dist.isend(c, dst=1).wait()
    d = torch.zeros(8, dtype=torch.int32); assert dist.recv(d) == 1  # from any source
    p2p = {"send": a.nbytes, "isend": c.nbytes}
else:
    dist.recv(torch.zeros(64, dtype=torch.float16), src=0)
    dist.irecv(torch.zeros(32), src=0).wait()
    d = torch.ones(8, dtype=torch.int32); dist.send(d, dst=0)
    p2p = {"send": d.nbytes}
with open(os.path.join(sys.argv[1], f"expect{rank}.json"), "w") as f:
    json.dump({"sent": sent, "got": got, "p2p": p2p}, f)
dist.destroy_process_group()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(tmp_path, run_cli, *flags):
    (tmp_path / "train.py").write_text(TRAIN)
    r = run_cli(
        ["trace", "-o", str(tmp_path / "run"), *flags,
         "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "train.py",
         str(tmp_path)],
        cwd=tmp_path, timeout=240,
        env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return flowmap.load(str(tmp_path / "run"))


@pytest.mark.slow
def test_collectives_and_p2p_of_two_gloo_ranks(tmp_path, run_cli):
    # GIVEN a 2-rank gloo job that calls every kind of collective and p2p op
    run = torchrun(tmp_path, run_cli)
    assert run.health.tracer_errors == 0, run.health.error_messages
    ranks = {s.process: s.pid for s in run.shards if s.process}
    assert set(ranks) == {"rank0", "rank1"}
    for rank in (0, 1):
        expect = json.loads((tmp_path / f"expect{rank}.json").read_text())
        pid = ranks[f"rank{rank}"]
        mine = [h for h in run.hops if h.pid == pid and h.transport == "collective"]
        # THEN each collective is one hop rank -> group node, carrying what this rank sends
        sent: dict = {}
        got: dict = {}
        for h in mine:
            if h.dst == "group[0,1]":
                role = h.src.split("/")[0]
                assert h.src in (f"rank{rank}", f"learner/rank{rank}")
                sent.setdefault(h.name if role != "learner" else f"learner:{h.name}",
                                []).append(h.nbytes)
            else:
                # a rank that only receives: group node -> rank
                assert (h.src, h.dst) == ("group[0,1]", f"rank{rank}")
                got.setdefault(h.name, []).append(h.nbytes)
        assert sent == expect["sent"] and got == expect["got"]
    # and p2p sends are joined to their receives: rank -> rank, exact bytes
    e0 = json.loads((tmp_path / "expect0.json").read_text())["p2p"]
    e1 = json.loads((tmp_path / "expect1.json").read_text())["p2p"]
    p2p = sorted((h.src, h.dst, h.name, h.nbytes) for h in run.hops if h.transport == "p2p")
    assert p2p == sorted([("rank0", "rank1", "send", e0["send"]),
                          ("rank0", "rank1", "isend", e0["isend"]),
                          ("rank1", "rank0", "send", e1["send"])])
    # one seam per op and group and rank: never rank x rank edges for a collective
    assert {k for k in run.seams if k[2] == "all_reduce"} == {
        ("rank0", "group[0,1]", "all_reduce"), ("rank1", "group[0,1]", "all_reduce"),
        ("learner/rank0", "group[0,1]", "all_reduce"),
        ("learner/rank1", "group[0,1]", "all_reduce")}


@pytest.mark.slow
def test_no_transport_dist_records_no_collective(tmp_path, run_cli):
    run = torchrun(tmp_path, run_cli, "--no-transport", "dist")
    assert run.hops == []
