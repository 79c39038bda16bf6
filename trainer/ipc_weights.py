"""Weight sync over CUDA IPC, for engines colocated with rank 0 (as verl's colocated workers do).

On CUDA, writing the new weights into a host shared-memory slot would copy
them device -> host in rank 0 and host -> device again in every engine: a
device bounce of the whole model per step. Instead rank 0 keeps two device
snapshots of its parameters (double-buffered, like the shared-memory weight
slots: the driver may still read version v-1 while v is written), copies the
new weights into the snapshot of this version (device to device), and sends
only `torch.multiprocessing.reductions.reduce_tensor` of each snapshot tensor:
a `(rebuild_cuda_tensor, args)` pair whose args hold a cudaIpcMemHandle, a
reference-counter handle and an event handle, a few hundred bytes whatever the
tensor's size. The driver rebuilds each (`rebuild_cuda_tensor(*args)` maps
rank 0's memory into its own address space, once per storage) and the
engines copy from it device to device.

flowmap sees both ends without annotation: its `cuda_ipc` integration records
each `reduce_tensor` of a CUDA tensor as a send half and each
`rebuild_cuda_tensor` as its receive half (`flowmap.integrations.transports.cuda_ipc`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

Handles = list[tuple[str, tuple[Any, tuple[Any, ...]]]]  # (parameter name, (rebuild fn, args))


class IpcPublisher:
    """Rank 0's side: two device snapshots of the parameters and their IPC handles."""

    def __init__(self, model: nn.Module) -> None:
        named = list(model.named_parameters())
        # One storage per parameter: each handle opens exactly that parameter's bytes.
        self.snapshots = [{n: torch.empty_like(p, requires_grad=False) for n, p in named}
                          for _ in range(2)]

    def publish(self, model: nn.Module, version: int) -> Handles:
        """Copy the weights of `version` into its snapshot; its handles, valid until version + 2."""
        from torch.multiprocessing.reductions import reduce_tensor

        snapshot = self.snapshots[version % 2]
        with torch.no_grad():
            for name, p in model.named_parameters():
                snapshot[name].copy_(p.detach(), non_blocking=True)
        device = next(iter(snapshot.values())).device
        # The copies must be done before another process reads the memory: IPC shares memory,
        # not this stream's order of work.
        torch.cuda.current_stream(device).synchronize()
        return [(name, reduce_tensor(t)) for name, t in snapshot.items()]


def open_handles(handles: Handles) -> dict[str, torch.Tensor]:
    """The driver's side: each handle rebuilt into a tensor on rank 0's memory (no copy)."""
    return {name: fn(*args) for name, (fn, args) in handles}
