"""CUDA IPC: tensors shared between processes by handle (`cuda_ipc` transport).

verl's colocated weight sync, slime and SGLang's `update_weights_from_tensor`,
and every CUDA tensor put on a torch.multiprocessing queue go through
`torch.multiprocessing.reductions.reduce_tensor`, which turns a CUDA tensor
into `(rebuild_cuda_tensor, args)`: a cudaIpcMemHandle of its storage, a
reference-counter handle and an event handle, plus shape, stride and dtype.
Whatever carries that pair (a queue, ZMQ, Ray, an RPC), the receiver calls
`rebuild_cuda_tensor(*args)` and maps the sender's memory: no tensor bytes
move, only the handles.

So a hop over CUDA IPC is recorded from the pair alone, wherever it travels:
`reduce_tensor` of a CUDA tensor writes a send half (the sender's owner), and
`rebuild_cuda_tensor` its receive half (the receiver's owner), joined by a key
digested from the storage handle and the view's place in it. The hop's
`nbytes` are the bytes of the storage the handle opens (what the receiver can
read without a copy); its `wire_bytes` are the handles' own bytes (the three
opaque byte strings), what actually crossed.

The leaf is read from the args, not from the tensor, so nothing here touches
the device: no synchronisation, no copy. `handle_facts` recognises the pair
or its bare args wherever a program builds them (tested on hand-built tuples
of torch's real signature, which needs no GPU).
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from flowmap.integrations.transports import record

if TYPE_CHECKING:
    from flowmap.capture.describe import Description

TRANSPORT = "cuda_ipc"
CHANNEL = "cuda_ipc"
NAME = "ipc_tensor"  # the payload's name: one hop per shared tensor
# torch.multiprocessing.reductions.rebuild_cuda_tensor's parameters, in order (torch 2.x).
ARGS = ("tensor_cls", "tensor_size", "tensor_stride", "tensor_offset", "storage_cls", "dtype",
        "storage_device", "storage_handle", "storage_size_bytes", "storage_offset_bytes",
        "requires_grad", "ref_counter_handle", "ref_counter_offset", "event_handle",
        "event_sync_required")
_HANDLE, _SIZE, _OFFSET, _REF, _EVENT = (ARGS.index(n) for n in (
    "storage_handle", "storage_size_bytes", "storage_offset_bytes", "ref_counter_handle",
    "event_handle"))


@dataclass(frozen=True, slots=True)
class IpcHandle:
    """What one `(rebuild_cuda_tensor, args)` pair says, read from its args alone."""

    shape: tuple[int, ...]
    dtype: str
    device: str  # "cuda:<index>"
    view_bytes: int  # the tensor's elements × itemsize (its view of the storage)
    storage_bytes: int  # the storage the handle opens
    handle_bytes: int  # the opaque handles' bytes: memory, reference counter, event
    key: str  # the message key: storage handle, its offset, the view's offset and shape

    @property
    def storage_id(self) -> tuple[int, str]:
        """A storage identity that holds across processes: the same handle opens the same memory."""
        return (int(self.key.split("-")[0], 16), f"{self.device}#ipc")


def handle_facts(obj: Any) -> IpcHandle | None:
    """`obj` read as a CUDA IPC handle: the `(rebuild_cuda_tensor, args)` pair or the args; else None."""
    if type(obj) is tuple and len(obj) == 2 and callable(obj[0]) and \
            getattr(obj[0], "__name__", "") == "rebuild_cuda_tensor":
        obj = obj[1]
    if type(obj) is not tuple or len(obj) != len(ARGS):
        return None
    handle, size, offset = obj[_HANDLE], obj[_SIZE], obj[_OFFSET]
    if not isinstance(handle, bytes) or type(size) is not int or type(offset) is not int:
        return None
    try:
        shape = tuple(int(n) for n in obj[ARGS.index("tensor_size")])
        dtype = str(obj[ARGS.index("dtype")]).removeprefix("torch.")
        itemsize = int(getattr(obj[ARGS.index("dtype")], "itemsize", 0))
        device = obj[ARGS.index("storage_device")]
        view_offset = int(obj[ARGS.index("tensor_offset")])
    except (TypeError, ValueError):
        return None
    numel = 1
    for n in shape:
        numel *= n
    opaque = sum(len(b) for b in (handle, obj[_REF], obj[_EVENT]) if isinstance(b, bytes))
    crc = zlib.crc32(handle) << 32 | offset & 0xFFFFFFFF
    key = f"{crc:x}-{view_offset:x}-{'x'.join(map(str, shape))}"
    return IpcHandle(shape, dtype, f"cuda:{device}" if type(device) is int else str(device),
                     numel * itemsize, size, opaque, key)


class _Handles:
    """What holds a handle's storage id for the run: no tensor of the sender's is in hand to
    watch being freed, and one handle opens one allocation, so the same handle (say, weights
    synced each step from one snapshot buffer) is the same storage for as long as it is sent."""


HANDLES = _Handles()


def description(h: IpcHandle) -> Description:
    """The tensor the handle opens, as a hop's leaf: built from the args, no device access.
    The describers load at the first handle, so that importing torch stays lean."""
    from flowmap.capture.describe import Description

    d = Description(None)
    d.add(("", "tensor", h.shape, h.dtype, h.device, h.view_bytes, 1, None))
    d.storage(*h.storage_id, HANDLES)
    d.nbytes = h.storage_bytes
    return d


def sent(args: tuple[Any, ...]) -> None:
    """The send half of one handle (the sender's owner; the receiver joins by key)."""
    h = handle_facts(args)
    if h is not None:
        record.send_half(_owner(), record.UNTRACED, NAME, description(h), h.storage_bytes,
                         TRANSPORT, CHANNEL, h.key, h.handle_bytes, record.now_ns())


def received(args: tuple[Any, ...]) -> None:
    """The receive half of one handle: who opened it."""
    h = handle_facts(args)
    if h is not None:
        record.receive_half(_owner(), NAME, TRANSPORT, CHANNEL, h.key, h.handle_bytes,
                            record.now_ns())


def _owner() -> str:
    from flowmap.capture import api

    return api.current_owner()


def install(module: ModuleType) -> None:
    """Wrap `reduce_tensor` and `rebuild_cuda_tensor` (pickle finds the wrappers by name)."""
    if getattr(module, "_flowmap_cuda_ipc", False):
        return
    reduce_tensor = module.reduce_tensor
    rebuild = module.rebuild_cuda_tensor

    @functools.wraps(rebuild)
    def rebuild_cuda_tensor(*args: Any) -> Any:
        tensor = rebuild(*args)  # a failure to open the handle is the program's, untouched
        try:
            received(args)
        except Exception as exc:  # never into the program
            record.error(exc)
        return tensor

    @functools.wraps(reduce_tensor)
    def reduce(tensor: Any) -> Any:
        out = reduce_tensor(tensor)
        # torch's body names the module's global, which is the wrapper once installed
        if type(out) is tuple and len(out) == 2 and (out[0] is rebuild_cuda_tensor or
                                                     out[0] is rebuild):
            out = (rebuild_cuda_tensor, out[1])
            try:
                sent(out[1])
            except Exception as exc:
                record.error(exc)
        return out

    setattr(module, "rebuild_cuda_tensor", rebuild_cuda_tensor)  # noqa: B010 (a module's global)
    setattr(module, "reduce_tensor", reduce)  # noqa: B010
    setattr(module, "_flowmap_cuda_ipc", True)  # noqa: B010
