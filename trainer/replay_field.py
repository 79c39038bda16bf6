"""The `replay` field of the trainer's payloads, stored under the names the transports use.

A leaf, a rollout batch, a micro-batch and a model turn each have one `replay`
field: the arrays themselves (payload transport, a `Replay`), the replay-store
entry that holds them (handle transport: one `ReplayHandle` for a leaf, one per
row for a batch), or None (the model records no selections).

flowmap describes a payload by what its instance stores, so the trace names the
arrays by where they ride: `[*].indexer_topk` on the leaves into the ready
buffer, `[*].replay_handle` under the handle transport, nothing at all when
there is no replay. This descriptor keeps exactly those names in the instance
`__dict__` (and none when the field is None), so the trace, the baselines and
the DSA R3 findings read the same whatever the Python attribute is called.
The owning dataclasses are therefore not slotted: a slot would always be set.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from flowmap.trainer.replay import Replay

H = TypeVar("H")  # what the handle transport stores: one handle, or one per row

ARRAY_NAMES = ("routed_experts", "indexer_topk")  # a Replay's arrays, in wire order


class ReplayField(Generic[H]):
    """A dataclass field of type `Replay | H | None` (default None), see the module docstring."""

    def __init__(self, handle_name: str) -> None:
        self.handle_name = handle_name  # the key a handle is stored under

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> None: ...

    @overload
    def __get__(self, obj: object, owner: type) -> Replay | H | None: ...

    def __get__(self, obj: object | None, owner: type) -> Replay | H | None:
        if obj is None:
            return None  # the dataclass default
        stored: dict[str, Any] = obj.__dict__
        if self.handle_name in stored:
            handle: H = stored[self.handle_name]
            return handle
        if ARRAY_NAMES[0] in stored:
            return Replay(stored[ARRAY_NAMES[0]], stored[ARRAY_NAMES[1]])
        return None

    def __set__(self, obj: object, value: Replay | H | None) -> None:
        stored: dict[str, Any] = obj.__dict__
        for key in (*ARRAY_NAMES, self.handle_name):
            stored.pop(key, None)
        if isinstance(value, Replay):
            stored[ARRAY_NAMES[0]] = value.routed_experts
            stored[ARRAY_NAMES[1]] = value.indexer_topk
        elif value is not None:
            stored[self.handle_name] = value
