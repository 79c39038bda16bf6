"""flowmap's CUDA paths on a GPU: IPC handles, CUDA tensors described, device bounces, the trainer.

Runs only where CUDA is present; NOT YET VERIFIED on a GPU (written on a
CPU-only machine, where tests/unit/test_cuda_ipc.py, test_describe_device.py
and test_device_bounce.py cover what the CPU can run: hand-built handle
tuples, meta tensors, records with a `cuda:0` device). scripts/device_check.sh
runs these first.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

import flowmap


def _cuda_devices() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


pytestmark = pytest.mark.skipif(_cuda_devices() == 0, reason="needs CUDA")

ROOT = Path(__file__).resolve().parents[2]


def _trace(tmp_path: Path, run_cli, program: str, *args: str, timeout: float = 240):
    (tmp_path / "prog.py").write_text(textwrap.dedent(program))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "prog.py", *args], cwd=tmp_path,
                timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return flowmap.load(str(tmp_path / "run"))


# -- CUDA IPC ------------------------------------------------------------------------------
def test_a_real_handle_reads_as_torch_made_it():
    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    from flowmap.integrations.transports import cuda_ipc

    t = torch.randn(256, 64, device="cuda")
    pair = reduce_tensor(t)
    h = cuda_ipc.handle_facts(pair)
    assert h is not None
    assert (h.shape, h.dtype, h.device) == ((256, 64), "float32", f"cuda:{t.device.index}")
    assert h.view_bytes == h.storage_bytes == t.untyped_storage().nbytes() == 256 * 64 * 4
    assert 0 < h.handle_bytes < 1024


IPC_PROGRAM = """
    import torch
    import torch.multiprocessing as mp
    import flowmap
    from torch.multiprocessing.reductions import reduce_tensor


    def engine(q, done):
        flowmap.set_owner("engine")
        for _ in range(2):
            fn, args = q.get()
            t = fn(*args)  # rank 0's memory, mapped here: no copy
            done.put(float(t.sum()))


    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        q, done = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=engine, args=(q, done))
        p.start()
        flowmap.set_owner("trainer")
        weights = [torch.ones(256, 64, device="cuda"), torch.ones(64, device="cuda")]
        for step, w in enumerate(weights):
            flowmap.step(step)
            q.put(reduce_tensor(w))
            assert done.get(timeout=120) == w.numel()
        p.join(timeout=60)
"""


def test_a_handle_sent_to_another_process_is_one_cuda_ipc_hop(tmp_path, run_cli):
    run = _trace(tmp_path, run_cli, IPC_PROGRAM)
    hops = sorted((h for h in run.events.hops if h.transport == "cuda_ipc"), key=lambda h: h.step)
    assert [(h.src, h.dst, h.step) for h in hops] == [("trainer", "engine", 0),
                                                      ("trainer", "engine", 1)]
    assert [h.nbytes for h in hops] == [256 * 64 * 4, 64 * 4]  # the storages they open
    assert all(0 < (h.wire_bytes or 0) < 1024 for h in hops)  # the handles that crossed
    assert {h.leaves[0].device for h in hops} == {"cuda:0"}


# -- describing CUDA tensors ---------------------------------------------------------------
def test_cuda_tensors_are_described_without_a_device_synchronisation():
    import torch

    from flowmap.capture.describe import describe

    base = torch.randn(1000, device="cuda")
    other = torch.randn(1000, device="cuda")
    payload = {"base": base, "head": base[:500], "mid": base[250:750], "other": other[250:],
               "strided": torch.randn(8, 8, device="cuda").t(), "list": [base, other]}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
    try:
        d = describe(payload)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    leaves = {leaf[0]: leaf for leaf in d.leaves}
    assert leaves["base"][4] == f"cuda:{base.device.index}" and leaves["head"][2] == (500,)
    assert d.nbytes == 4000 + 3000 + 8 * 8 * 4  # views of base once; the list repeats them
    sb, sh, sm, so = d.storages[:4]
    assert sb == sh and len({sb, sm, so}) == 3


# -- device bounces ------------------------------------------------------------------------
BOUNCE_PROGRAM = """
    import sys
    import torch
    import flowmap

    bounce = sys.argv[1] == "bounce"
    for step in range(2):
        flowmap.step(step)
        lp = torch.randn(64, 128, device="cuda")
        flowmap.hop("actor", "driver", {"log_probs": lp}, name="log_probs")
        host = lp.cpu() if bounce else lp
        flowmap.hop("driver", "ref", {"log_probs": host}, name="batch")
        back = host.cuda() if bounce else lp
        flowmap.hop("ref", "trainer", {"log_probs": back}, name="kl_inputs")
"""


@pytest.mark.parametrize("mode", ["bounce", "fixed"])
def test_a_copy_down_and_back_up_is_a_device_bounce(tmp_path, run_cli, mode):
    from flowmap.findings import device_bounce

    found = device_bounce.detect(_trace(tmp_path, run_cli, BOUNCE_PROGRAM, mode).view)
    if mode == "fixed":
        assert found == []
    else:
        (f,) = found
        assert f.bytes_per_step == 2 * 64 * 128 * 4 and "cuda:0" in f.message


# -- the trainer on CUDA -------------------------------------------------------------------
SMALL = ["--steps", "2", "--no-progress", "--set", "train.synchronous=true",
         "--set", "warmup.clean_steps=2", "--set", "warmup.noisy_steps=2"]


def test_device_auto_is_cuda_here():
    from flowmap.trainer.config import parse_args
    from flowmap.trainer.device import resolve_device

    assert resolve_device(parse_args(["--device", "auto"]).device) == "cuda"


def test_moe_replay_on_cuda_is_refused_in_one_sentence():
    import subprocess

    r = subprocess.run([sys.executable, str(ROOT / "examples" / "grpo_tiny.py"), "--device",
                        "cuda", "--set", "model.moe_experts=4"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "grpo_tiny: MoE/DSA replay runs on the CPU only for now; drop model.moe_experts and "
        "model.dsa_index_topk, or use --device cpu"]


def test_one_rank_on_nccl_trains_and_syncs_by_ipc(tmp_path, run_cli):
    import subprocess

    r = subprocess.run([sys.executable, str(ROOT / "examples" / "grpo_tiny.py"), "--device",
                        "cuda", "--dp", "1", "--set", "train.kl_coef=0.05", *SMALL],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 steps in" in r.stdout


def test_two_ranks_traced_reduce_the_parameter_bytes_and_sync_by_handle(tmp_path, run_cli):
    # two GPUs: NCCL; one GPU: gloo over CUDA tensors (trainer/device.py)
    from flowmap.trainer.config import parse_args
    from flowmap.trainer.driver import model_config
    from flowmap.trainer.model import build_model
    from flowmap.trainer.task import make_tokenizer

    # two PPO epochs: an earlier update's all-reduce too, each of the parameters' bytes
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(ROOT / "examples" / "grpo_tiny.py"),
                 "--device", "cuda", "--dp", "2", "--set", "train.ppo_epochs=2", *SMALL],
                cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    run = flowmap.load(str(tmp_path / "run"))
    cfg = parse_args(SMALL)
    model = build_model(model_config(cfg, make_tokenizer().vocab_size), cfg.seed)
    params = sum(p.numel() for p in model.parameters()) * 4
    grads: dict[int | None, list[int]] = {}
    for h in run.events.hops:
        if h.src == "trainer/rank0" and h.name == "all_reduce" and h.nbytes > 64:
            grads.setdefault(h.step, []).append(h.nbytes)  # not the metrics' 32 B sums
    assert grads == {0: [params, params], 1: [params, params]}
    ipc = [h for h in run.events.hops if h.transport == "cuda_ipc"]
    assert ipc and {(h.src, h.dst) for h in ipc} == {("trainer/rank0", "weight_sync")}
    for step in (0, 1):
        assert sum(h.nbytes for h in ipc if h.step == step) == params
    assert max(h.wire_bytes or 0 for h in ipc) < 1024
