"""`--device cpu|cuda|auto`, and the placement helpers the CUDA path uses, on what the CPU can run.

Without a GPU, `--device cuda` must be one sentence and exit 2 (no traceback),
`auto` must be the CPU, and the helpers that move a micro-batch or an engine
step's index tensors to the device must move every tensor field (checked with
the `meta` device) and copy nothing on the CPU. The CUDA runs themselves are
tests/gpu/test_cuda_paths.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flowmap.trainer.attention import AttentionGroup, PagedBatch
from flowmap.trainer.config import ConfigError, build, parse_args
from flowmap.trainer.device import backend_for, engine_device, moved, rank_device, resolve_device
from flowmap.trainer.train.split import MicroBatch

ROOT = Path(__file__).resolve().parents[2]
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


@no_cuda
def test_device_cuda_without_a_gpu_is_one_sentence_and_exit_2():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "grpo_tiny.py"), "--device", "cuda"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("grpo_tiny: --device cuda asks for a CUDA GPU") and "Traceback" not in line


@no_cuda
def test_auto_is_the_cpu_without_a_gpu_and_cpu_is_the_default():
    assert parse_args([]).device == "cpu"
    assert resolve_device(parse_args(["--device", "auto"]).device) == "cpu"
    with pytest.raises(ConfigError, match="torch sees none"):
        parse_args(["--set", "device=cuda"])


def test_an_unknown_device_is_refused():
    with pytest.raises(ConfigError, match="device must be one of cpu, cuda, auto"):
        build({"device": "tpu"})


def test_cpu_places_everything_on_the_cpu_with_gloo():
    assert rank_device("cpu", 1) == engine_device("cpu") == torch.device("cpu")
    assert backend_for("cpu", 2) == "gloo"


def _micro_batch() -> MicroBatch:
    b, t, r = 2, 6, 3
    return MicroBatch(torch.zeros(b, t, dtype=torch.int64), torch.ones(b, t, dtype=torch.int64),
                      torch.arange(t).expand(b, t), torch.ones(b, r), torch.zeros(b, r),
                      torch.zeros(b, r))


def test_a_micro_batch_moves_whole_and_on_the_cpu_is_not_copied():
    mb = _micro_batch()
    on = moved(mb, torch.device("meta"))
    fields = ("input_ids", "attention_mask", "position_ids", "response_mask",
              "rollout_log_probs", "advantages")
    assert {getattr(on, f).device.type for f in fields} == {"meta"}
    assert [getattr(on, f).shape for f in fields] == [getattr(mb, f).shape for f in fields]
    assert on.replay is None and mb.input_ids.device.type == "cpu"  # the original is untouched
    assert moved(mb, torch.device("cpu")) is mb  # nothing to move: the same object


def test_an_engine_steps_index_tensors_move_with_their_groups():
    group = AttentionGroup(None, torch.tensor([0, 2]), torch.zeros(2, 4, dtype=torch.int64),
                           torch.ones(2, 1, 1, 4, dtype=torch.bool))
    batch = PagedBatch(torch.arange(3), [group, group], torch.tensor([0, 2]))
    on = moved(batch, torch.device("meta"))
    assert on.slot_mapping.device.type == on.last_index.device.type == "meta"
    for g in on.groups:
        assert g.token_index is None
        assert {g.query_index.device.type, g.context_slots.device.type,
                g.attn_mask.device.type} == {"meta"}
