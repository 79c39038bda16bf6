"""Where the trainer's parts run: CPU, or CUDA for the engines, the ranks and the reference model.

The configuration names `cpu`, `cuda` or `auto`; `resolve_device` turns
that into `cpu` or `cuda` once, in the driver, so a missing GPU is one sentence
at start-up. These helpers then place each part:

- rank k uses GPU `k mod n` of the n it sees; NCCL needs one GPU per rank, so
  when there are fewer GPUs than ranks (one GPU, dp = 2) the group is gloo over
  CUDA tensors instead (gloo copies them through the host for each collective);
- the engines and the reference model use GPU 0, beside rank 0 (colocated, as
  verl places its rollout workers), which is what lets the weight sync go over
  CUDA IPC (`ipc_weights.py`) instead of through host memory.

What crosses a process boundary by shared memory (micro-batches, reference
log-probs) stays on the host and is moved to the device by whoever computes
on it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import torch

T = TypeVar("T")


class DeviceError(ValueError):
    """A device the run cannot have; `config.parse_args` reports it as a ConfigError."""


def resolve_device(name: str) -> str:
    """The device the run uses: "cpu" or "cuda"; "auto" is cuda where torch sees one."""
    if name == "cpu":
        return "cpu"
    available = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if name == "auto":
        return "cuda" if available else "cpu"
    if not available:
        raise DeviceError("--device cuda asks for a CUDA GPU, but torch sees none on this machine "
                          "(use --device cpu or --device auto)")
    return "cuda"


def check_device(device: str, has_replay: bool) -> None:
    """Refuse, in one sentence, a device the run cannot have (checked once, by `parse_args`)."""
    if resolve_device(device) == "cuda" and has_replay:
        raise DeviceError("MoE/DSA replay runs on the CPU only for now; drop model.moe_experts "
                          "and model.dsa_index_topk, or use --device cpu")


def rank_device(device: str, rank: int) -> torch.device:
    """The device of rank `rank` under the resolved `device` ("cpu" or "cuda")."""
    if device != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", rank % max(1, torch.cuda.device_count()))


def backend_for(device: str, dp: int) -> str:
    """The process-group backend: NCCL with one GPU per rank, else gloo (also over CUDA tensors)."""
    if device == "cuda" and torch.cuda.device_count() >= dp:
        return "nccl"
    return "gloo"


def engine_device(device: str) -> torch.device:
    """Engines and the reference model: GPU 0, colocated with rank 0."""
    return torch.device("cuda", 0) if device == "cuda" else torch.device("cpu")


def moved(obj: T, device: torch.device) -> T:
    """A copy of dataclass `obj` with every tensor field (and tensors in list fields) on `device`.

    Fields already there are kept as they are (`Tensor.to` returns the tensor
    itself), so on CPU this copies nothing.
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        there: Any
        if isinstance(value, torch.Tensor):
            there = value.to(device, non_blocking=True)  # host -> device: ordered on the stream
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            there = [moved(v, device) for v in value]
            if all(a is b for a, b in zip(there, value)):
                continue
        else:
            continue
        if there is not value:
            changes[f.name] = there
    return dataclasses.replace(obj, **changes) if changes else obj
