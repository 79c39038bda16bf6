"""What one seam-map entry records, however its target is called.

A Python target is wrapped (`flowmap.seams.wrapper`); a Ray task or actor
method is not (that would break `.remote`) and is recorded by the Ray
integration, the call in the worker that runs it and the result where the
caller resolves its ref. Both read the entry through this one `Plan` and
these functions — which arguments make the payload (`args`), the dimension
names of its leaves (`dims`), where the item ids are (`items`), the step
(`step`) and the hops derived from a field (`also`) — so the two paths
record the same seam the same way and cannot drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowmap.capture import calls
from flowmap.seams import paths
from flowmap.seams.spec import ExtraHop, SeamSpec
from flowmap.seams.variants import Namer

if TYPE_CHECKING:
    from flowmap.capture.tracer import Tracer


class Plan:
    """A spec split once, at patch time, into what the call and the result each record."""

    __slots__ = (
        "spec", "call_dims", "result_dims", "call_items", "result_items",
        "call_also", "result_also", "namer",
    )

    def __init__(self, spec: SeamSpec) -> None:
        self.spec = spec
        self.call_dims: dict[str, tuple[str, ...]] = {}
        self.result_dims: dict[str, tuple[str, ...]] = {}
        for path, dims in spec.dims.items():
            # both sides' leaves are named as the paths are: `batch.tokens`, `result.tokens`
            side = self.result_dims if paths.root(path) == calls.RESULT else self.call_dims
            side[path] = dims
        on_result = spec.items is not None and paths.split(spec.items)[0] == calls.RESULT
        self.call_items = None if on_result else spec.items
        self.result_items = spec.items if on_result else None
        self.call_also = tuple(h for h in spec.also if paths.split(h.payload)[0] != calls.RESULT)
        self.result_also = tuple(h for h in spec.also if paths.split(h.payload)[0] == calls.RESULT)
        self.namer = Namer() if spec.split_by else None

    def owner(self, bound: dict[str, Any] | None) -> str:
        """The callee's owner for this call: with `split_by`, an instance per what it was given."""
        if self.namer is None or bound is None:
            return self.spec.owner
        label = self.namer.label(self.spec.split_by, bound)
        if not label:
            return self.spec.owner
        # `policy/ref_model`, `policy/model+grad`; told apart by grad mode alone: `TinyLM+grad`
        return f"{self.spec.owner}{'' if label.startswith('+') else '/'}{label}"

    def payload(self, bound: dict[str, Any]) -> dict[str, Any]:
        """The call's payload, as `flowmap.seam` builds it: the selected arguments by name."""
        args = self.spec.args
        if args is not None and len(args) == 1:  # the common seam: one argument, no comprehension
            name = args[0]
            return {name: bound[name]} if name in bound else {}
        return calls.payload(bound, args)

    def items_root(self) -> str | None:
        """The argument the call's item ids are read from (None: they are not on the call)."""
        return None if self.call_items is None else paths.split(self.call_items)[0]


def call_hop(t: Tracer, plan: Plan, src: str, dst: str, payload: dict[str, Any],
             root: dict[str, Any] | None, transport: str) -> None:
    """A call hop of `plan`'s seam carrying `payload`; its items are read from `root`
    (the call's arguments by name), when given."""
    items = item_ids(t, root, plan.call_items) if root is not None and plan.call_items else ()
    try:
        t.hop(src, dst, payload, plan.spec.name, items, None, None, transport, plan.call_dims or None)
    except Exception as exc:
        t.error(exc)


def result_hop(t: Tracer, plan: Plan, src: str, dst: str, out: Any, root: dict[str, Any] | None,
               transport: str) -> None:
    """The result hop of `plan`'s seam; `root` holds `result` (and the arguments, where the
    result is recorded beside them) for its item ids (None: the seam reads none)."""
    items = item_ids(t, root, plan.result_items) if root is not None and plan.result_items else ()
    try:
        t.hop(src, dst, {calls.RESULT: out}, plan.spec.result_name, items, None, None,  # calls.reply
              transport, plan.result_dims or None)
    except Exception as exc:
        t.error(exc)


def item_ids(t: Tracer, root: dict[str, Any], path: str | None) -> list[Any]:
    if path is None:
        return []
    try:
        return paths.item_ids(paths.resolve(root, path))
    except Exception as exc:
        t.error(exc)
        return []


def set_step(t: Tracer, bound: dict[str, Any], path: str) -> None:
    try:
        value = paths.resolve(bound, path)
        # the program's own step, even one equal to a step counted from its optimizer: from
        # here on its steps are the ones that count
        if isinstance(value, int) and not isinstance(value, bool) and \
                (value != t.step or not t.explicit_steps):
            t.set_step(value)
    except Exception as exc:
        t.error(exc)


def extra_hops(
    t: Tracer, root: dict[str, Any], hops: tuple[ExtraHop, ...], transport: str
) -> None:
    for h in hops:
        try:
            # named by the field it came from (`advantages`), not `(value)`; a path's last part
            leaf = paths.split(h.payload)[1][-1:] or [paths.split(h.payload)[0]]
            t.hop(src=h.src, dst=h.dst, payload={leaf[0]: paths.resolve(root, h.payload)}, name=h.name,
                  items=(), step=None, version=None, transport=transport, dims=None)
        except Exception as exc:
            t.error(exc)
