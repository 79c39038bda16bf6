"""`flowmap trace -m torch.distributed.run --nproc-per-node 2 train.py`: one run, every rank.

The training script never imports flowmap: its seams come from a seam map
whose owners name the rank (`trainer/rank${RANK}`), which each rank loads
itself through the environment torchrun passes on.
"""

from __future__ import annotations

import importlib.util
import socket

import pytest

import flowmap

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torchrun needs torch")

DDP_LIB = '''
import torch
import torch.distributed as dist


class Trainer:
    def step(self, batch):
        grads = torch.ones(256) * dist.get_rank()
        return all_reduce_grads(grads)


def all_reduce_grads(grads):
    dist.all_reduce(grads)
    return grads
'''

TRAIN = '''
import torch
import torch.distributed as dist

from ddp_lib import Trainer

dist.init_process_group("gloo")
trainer = Trainer()
for step in range(3):
    out = trainer.step({"input_ids": torch.zeros(4, 16, dtype=torch.long)})
assert float(out[0]) == 1.0  # 0 + 1 summed over the two ranks
dist.destroy_process_group()
'''

SEAMS = '''
seams:
  - target: ddp_lib:Trainer.step
    owner: "trainer/rank${RANK:-x}"
    caller: dataset
    args: [batch]
    name: micro_batch
    result: false
    dims: {batch.input_ids: [batch, tokens]}
  - target: ddp_lib:all_reduce_grads
    owner: all_reduce
    name: grads
    transport: collective
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_two_rank_torchrun_job_is_one_run_with_both_ranks(tmp_path, run_cli):
    # GIVEN a 2-rank gloo job on loopback, traced through a seam map
    (tmp_path / "ddp_lib.py").write_text(DDP_LIB)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "seams.yaml").write_text(SEAMS)
    r = run_cli(
        ["trace", "-o", str(tmp_path / "run"), "--seams", "seams.yaml",
         "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "train.py"],
        cwd=tmp_path, timeout=180,
        env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(tmp_path)},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "never appeared" not in r.stderr
    # THEN the run merges the launcher's shard and one shard per rank, each complete
    run = flowmap.load(str(tmp_path / "run"))
    assert len(run.shards) == 3 and not run.truncated
    ranks = {s.process: s for s in run.shards if s.process}
    assert set(ranks) == {"rank0", "rank1"}
    # and every rank's hops are there, under its own owner
    for rank in (0, 1):
        pid = ranks[f"rank{rank}"].pid
        mine = [h for h in run.hops if h.pid == pid]
        assert {h.seam for h in mine} == {
            ("dataset", f"trainer/rank{rank}", "micro_batch"),
            (f"trainer/rank{rank}", "all_reduce", "grads"),
            ("all_reduce", f"trainer/rank{rank}", "grads"),
            # captured with no code: the all_reduce, run inside the seam's owner
            (f"all_reduce/rank{rank}", "group[0,1]", "all_reduce"),
        }
        assert len(mine) == 12
    grads = run.seams[("trainer/rank1", "all_reduce", "grads")]
    assert grads.transports == {"collective": 3} and grads.total_bytes == 3 * 256 * 4
    assert run.steps == []
    # one clock: the ranks' hops interleave on the merged timeline
    t0 = [h.t_ns for h in run.hops if h.pid == ranks["rank0"].pid]
    t1 = [h.t_ns for h in run.hops if h.pid == ranks["rank1"].pid]
    assert max(t0) > min(t1) and max(t1) > min(t0)
