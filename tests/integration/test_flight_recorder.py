"""DDP and FSDP2 under torchrun (gloo, 2 ranks on loopback): the collectives torch issues.

DDP's gradient all-reduce runs in C++ (its Reducer's buckets), where no Python
wrapper sees it: flowmap reads it from PyTorch's Flight Recorder. FSDP2 calls
`all_gather_single` and `reduce_scatter_single`, which the wrapper finds by
enumerating c10d. Every figure is checked against one computed here by hand
from the parameter sizes of the model, and an `--aggregate` trace of the same
job must give the same figures per seam and step.
"""

from __future__ import annotations

import importlib.util
import json
import re
import socket
from collections import defaultdict

import pytest
from seam_figures import seam_figures

import flowmap

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torchrun needs torch"), pytest.mark.slow]

STEPS = 4
IN, HIDDEN, OUT = 64, 128, 8
FLOAT = 4
# parameters per Linear: weight + bias
LAYERS = [IN * HIDDEN + HIDDEN, HIDDEN * OUT + OUT]  # 8,320 and 1,032 floats
PARAM_BYTES = sum(LAYERS) * FLOAT  # 37,408 B

TRAIN = f'''
import json, os, sys
import torch
import torch.distributed as dist
import flowmap

mode, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear({IN}, {HIDDEN}), torch.nn.ReLU(),
                            torch.nn.Linear({HIDDEN}, {OUT}))
if mode in ("ddp", "ring"):
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(model)
else:
    from torch.distributed.fsdp import fully_shard
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
buckets = []
for step in range({STEPS} if mode != "ring" else 30):
    if mode != "ring":  # "ring": no step boundary, a small ring (TORCH_FR_BUFFER_SIZE)
        flowmap.step(step)
    loss = model(torch.randn(4, {IN})).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if mode == "ddp":
        sizes = str(model._get_ddp_logging_data().get("bucket_sizes"))  # "37408" or "a, b"
        buckets.append([int(x) for x in sizes.split(",") if x.strip()])
entries = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(True, False))["entries"]
with open(os.path.join(out, f"expect{{rank}}.json"), "w") as f:
    json.dump({{"bucket_sizes": buckets, "recorded": entries[-1]["record_id"] + 1}}, f)
dist.destroy_process_group()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(tmp_path, run_cli, mode, name, *flags, env=None):
    (tmp_path / "train.py").write_text(TRAIN)
    r = run_cli(
        ["trace", "-o", str(tmp_path / name), *flags,
         "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "train.py",
         mode, str(tmp_path)],
        cwd=tmp_path, timeout=240,
        env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", **(env or {})},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp_path / name


def per_step(run, rank, name, dst="group[0,1]"):
    """bytes per step that `rank<N>` sends to the group on collectives called `name`."""
    out: dict = defaultdict(int)
    for h in run.hops:
        if (h.src, h.dst, h.name) == (f"rank{rank}", dst, name):
            out[h.step] += h.nbytes
    return dict(out)


def assert_aggregate_equal(tmp_path, run_cli, mode, full_dir):
    agg = torchrun(tmp_path, run_cli, mode, "agg", "--aggregate", "--detail-steps", "1")
    full, folded = seam_figures(full_dir), seam_figures(agg)
    collectives = {k for k in full if k[1].startswith("group[") or k[0].startswith("group[")}
    assert collectives
    for seam in collectives:
        a, b = full[seam], folded[seam]
        assert (a["hops"], a["bytes"], a["by_step"]) == (b["hops"], b["bytes"], b["by_step"]), seam


def test_ddp_bucket_all_reduce_and_start_up_broadcast_per_step(tmp_path, run_cli):
    # GIVEN a 2-rank DDP job whose gradient all-reduce torch runs in C++
    run_dir = torchrun(tmp_path, run_cli, "ddp", "run")
    run = flowmap.load(str(run_dir))
    assert run.health.tracer_errors == 0, run.health.error_messages
    for rank in (0, 1):
        buckets = json.loads((tmp_path / f"expect{rank}.json").read_text())["bucket_sizes"]
        # THEN every step carries the bucket all-reduce: the bytes torch reports for its
        # buckets, which are the parameters' bytes computed by hand
        assert all(sum(b) == PARAM_BYTES for b in buckets)
        assert per_step(run, rank, "all_reduce") == {s: PARAM_BYTES for s in range(STEPS)}
        # and the start-up broadcast of the parameters, from rank 0, before any step
        # (beside it DDP's own bookkeeping: the parameters' shapes at start-up, its
        # rebuilt bucket order after the first step; a few bytes each)
        me = f"rank{rank}"
        ends = (me, "group[0,1]") if rank == 0 else ("group[0,1]", me)
        sizes = [h.nbytes for h in run.hops if (h.src, h.dst, h.name) == (*ends, "broadcast")
                 and h.step is None]
        assert PARAM_BYTES in sizes and sum(sizes) < PARAM_BYTES + 1024
    # collectives are hops on the `collective` transport, one seam per op, group and rank
    ar = run.seams[("rank0", "group[0,1]", "all_reduce")]
    assert ar.transports == {"collective": STEPS}
    # AND an aggregated trace of the same job has the same figures per seam and step
    assert_aggregate_equal(tmp_path, run_cli, "ddp", run_dir)


def test_fsdp2_all_gathers_and_reduce_scatters_per_step(tmp_path, run_cli):
    # GIVEN a 2-rank FSDP2 job (fully_shard per layer and at the root)
    run_dir = torchrun(tmp_path, run_cli, "fsdp", "run")
    run = flowmap.load(str(run_dir))
    assert run.health.tracer_errors == 0, run.health.error_messages
    for rank in (0, 1):
        # THEN each step all-gathers every layer's shard twice (forward, and again in
        # backward after resharding): 2 x half the parameters = the parameters' bytes
        gathered = per_step(run, rank, "all_gather_single")
        assert gathered == {s: 2 * PARAM_BYTES // 2 for s in range(STEPS)}
        # and reduce-scatters every layer's full gradient once
        assert per_step(run, rank, "reduce_scatter_single") == {
            s: PARAM_BYTES for s in range(STEPS)}
        # and gloo's all-reduce behind reduce_scatter_single is not counted a second time
        assert per_step(run, rank, "all_reduce") == {}
        assert per_step(run, rank, "all_gather") == {}
    sizes = sorted({h.nbytes for h in run.hops if h.name == "all_gather_single"})
    assert sizes == sorted({n * FLOAT // 2 for n in LAYERS})  # one shard per layer
    assert_aggregate_equal(tmp_path, run_cli, "fsdp", run_dir)


def test_entries_the_ring_dropped_are_counted_in_the_run_health(tmp_path, run_cli):
    # GIVEN a DDP job with no step boundary and a ring of 4 entries: most of its
    # collectives are overwritten before flowmap reads the ring
    run_dir = torchrun(tmp_path, run_cli, "ring", "run", env={"TORCH_FR_BUFFER_SIZE": "4"})
    run = flowmap.load(str(run_dir))
    for rank in (0, 1):
        recorded = json.loads((tmp_path / f"expect{rank}.json").read_text())["recorded"]
        pid = next(s.pid for s in run.shards if s.process == f"rank{rank}")
        shard = next(s for s in run.shards if s.pid == pid)
        lost = sum(int(re.search(r"dropped (\d+) collective", m).group(1))
                   for m in shard.errors if "Flight Recorder" in m)
        hops = [h for h in run.hops if h.pid == pid and h.transport == "collective"]
        # THEN every collective the rank issued is either a hop or counted as lost. The
        # start-up broadcast is a hop of the Python wrapper (`_broadcast_coalesced`); its
        # ring entry is either among the lost, or was read and skipped as the wrapper's
        # (when the reader's thread came by in time)
        assert lost > 0
        by_wrapper = [h for h in hops if h.name == "broadcast" and h.nbytes == PARAM_BYTES]
        assert len(by_wrapper) == 1
        assert len(hops) - len(by_wrapper) + lost in (recorded - 1, recorded)
        assert "TORCH_FR_BUFFER_SIZE" in " ".join(shard.errors)


SPAWN = '''
import socket, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


def train(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    model = DistributedDataParallel(torch.nn.Linear(16, 4))
    for _ in range(2):
        model(torch.randn(2, 16)).sum().backward()
    # no destroy_process_group, and a forked child leaves through os._exit (no atexit)


if __name__ == "__main__":
    mp.start_processes(train, args=(int(sys.argv[1]),), nprocs=2, start_method="fork")
'''


def test_a_forked_rank_that_never_destroys_its_group_still_shows_its_all_reduces(
        tmp_path, run_cli):
    (tmp_path / "spawn_ddp.py").write_text(SPAWN)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "spawn_ddp.py", str(free_port())],
                cwd=tmp_path, timeout=240, env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    params = (16 * 4 + 4) * FLOAT
    for rank in (0, 1):  # named rank<N> at init_process_group (started as train/<N>)
        assert per_step(run, rank, "all_reduce") == {None: 2 * params}


FORK_AFTER_COLLECTIVES = '''
import atexit, os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
group = dist.distributed_c10d._get_default_group()
for _ in range(3):  # issued on the group object: only the Flight Recorder sees them
    group.allreduce([torch.ones(256)]).wait()
pid = os.fork()
if pid == 0:  # the child's exit handlers run, with its parent's reader and ring: they write nothing
    atexit._run_exitfuncs()
    os._exit(0)  # (not sys.exit: gloo's teardown in a forked child waits on its parent's threads)
os.waitpid(pid, 0)
dist.destroy_process_group()
'''


def test_a_child_forked_from_a_rank_never_writes_its_parents_collectives(tmp_path, run_cli):
    (tmp_path / "fork_rank.py").write_text(FORK_AFTER_COLLECTIVES)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "fork_rank.py", str(free_port())],
                cwd=tmp_path, timeout=120, env={"GLOO_SOCKET_IFNAME": "lo"})
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    all_reduces = [h for h in run.hops if h.name == "all_reduce"]
    assert len(all_reduces) == 3 and {h.pid for h in all_reduces} == {all_reduces[0].pid}



EXIT_WHILE_POLLING = '''
import sys, time
import torch
import torch.distributed as dist
from flowmap.integrations.transports import flight

# a reader that is always reading, and whose reads spend 0.3 s in c10d calls that release
# the GIL (a large ring, a slow machine): the program ends while one is under way
flight.POLL_S = 0.001
flight.Reader.due = lambda self: True
plain = flight.Reader._read_one


def slow_read_one(self, *args):
    group = dist.distributed_c10d._get_default_group()
    until = time.monotonic() + 0.3
    while time.monotonic() < until:
        group._get_sequence_number_for_group()
    return plain(self, *args)


flight.Reader._read_one = slow_read_one
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
dist.all_reduce(torch.ones(16))
time.sleep(0.1)
# no destroy_process_group: the group is alive as the interpreter finalizes
'''


def test_a_rank_that_exits_during_a_read_of_the_ring_ends_cleanly(tmp_path, run_cli):
    # GIVEN a rank that exits while the reader's thread is inside c10d: a daemon thread
    # that comes back for the GIL as the interpreter finalizes dies by std::terminate
    (tmp_path / "exit_polling.py").write_text(EXIT_WHILE_POLLING)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "exit_polling.py", str(free_port())],
                cwd=tmp_path, timeout=120, env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    # THEN the exit waits for that read: the program ends as it would untraced, exit 0
    assert r.returncode == 0, r.stderr[-3000:]
    assert "terminate called" not in r.stderr
    run = flowmap.load(str(tmp_path / "run"))
    assert [h.nbytes for h in run.hops if h.name == "all_reduce"] == [16 * FLOAT]
