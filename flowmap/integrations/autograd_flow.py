"""Data the training step never received as an argument: found through the loss's graph.

A training step often reads its data from lists and attributes
(`model.saved_actions`, a replay buffer) and takes no arguments
(`finish_episode()`), so no seam carries its input and it would not appear.
But its `loss.backward()` walks an autograd graph that ends in the tensors
the earlier stages returned. So, when a seam's result carries tensors that
require grad, a weak reference to each is kept with the seam's owner
(`note`); when `backward()` runs, the loss's graph is walked back
(`grad_fn.next_functions`, metadata only, nothing is computed) and each node
that is the `grad_fn` of a noted tensor still alive is a producer: a hop
`producer -> learner` carrying those tensors is recorded. A path stops at the
first producer it meets, so the hop names the nearest stage, not its inputs.

The walk holds every node it visits, so an id seen twice is the same node;
a noted tensor that died is never matched (its node may be gone, its id
reused). The learner is the script's function that called `backward()`, or,
when that is the driver (`main`, the top-level code), the optimizer step that
updates the weights (`Adam.step`). Nothing here raises into the program.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import weakref
from types import FrameType, ModuleType
from typing import Any

from flowmap.capture import importhook, state

MAX_NOTED = 4096  # tensors kept (weakly) for matching: the most recent
MAX_NODES = 50_000  # nodes one walk visits at most
MAX_LEAVES = 64  # tensors looked at in one result

_lock = threading.Lock()
# (tensor, the seam's owner, the result's name, the owner the result was handed to)
_noted: collections.deque[tuple[weakref.ref[Any], str, str, str]] = collections.deque(
    maxlen=MAX_NOTED)
_enabled = False
_FLOWMAP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_MARK = "__flowmap_autograd__"
_UNNAMED = "main"  # the default owner of a process nobody named: its driver


def enable() -> None:
    """Follow every later `backward()` in this process."""
    from flowmap.seams import wrapper

    global _enabled
    _enabled = True
    wrapper.watch_results(note)  # every seam-map target's result, from now on
    importhook.on_import("torch", _patch_backward)


def note(owner: str, name: str, value: Any, handed_to: str) -> None:
    """A seam's result: keep its tensors that carry a graph, weakly, under `owner`;
    `handed_to` already received them through the seam's own result hop."""
    if not _enabled:
        return
    torch = sys.modules.get("torch")
    if torch is None:
        return
    found: list[Any] = []
    _tensors(value, torch.Tensor, found, 0)
    if not found:
        return
    with _lock:
        for t in found:
            _noted.append((weakref.ref(t), owner, name, handed_to))


def _tensors(value: Any, tensor: type, out: list[Any], depth: int) -> None:
    """Tensors with a `grad_fn` in a result: itself, or in a tuple, list, dict or dataclass."""
    if len(out) >= MAX_LEAVES or depth > 3:
        return
    t = type(value)
    if t is tensor:  # the common result, told apart without a walk of its class
        if value.grad_fn is not None:
            out.append(value)
        return
    kind = _kind(t, tensor)
    if kind == _LEAF:
        return
    if kind == _TENSOR:
        if getattr(value, "grad_fn", None) is not None:
            out.append(value)
        return
    if kind == _SEQ:
        items: Any = value[:MAX_LEAVES]
    elif kind == _MAP:
        items = list(value.values())[:MAX_LEAVES]
    else:
        items = [getattr(value, f, None) for f in value.__dataclass_fields__]
    kinds = _KINDS
    for v in items:
        # a value of a type known to hold no graph (an environment step's reward, flags and
        # observation) is passed over without a frame: most results hold no tensor at all
        entry = kinds.get(id(type(v)))
        if entry is None or entry[0] is not type(v) or entry[1] != _LEAF:
            _tensors(v, tensor, out, depth + 1)


_LEAF, _TENSOR, _SEQ, _MAP, _FIELDS = range(5)
# id(type) -> (type, what `_tensors` does with its values): a result read once per
# environment step asks once per type (numbers, arrays and strings hold no graph).
# Keyed by id, as the describers' plans are: a dict keyed by the type would call a
# metaclass's `__hash__`.
_KINDS: dict[int, tuple[type, int]] = {}
MAX_KINDS = 1024


def _kind(t: type, tensor: type) -> int:
    entry = _KINDS.get(id(t))
    if entry is not None and entry[0] is t:
        return entry[1]
    kind = (_TENSOR if issubclass(t, tensor) else _SEQ if issubclass(t, (tuple, list)) else
            _MAP if issubclass(t, dict) else
            _FIELDS if getattr(t, "__dataclass_fields__", None) is not None else _LEAF)
    if len(_KINDS) >= MAX_KINDS:  # classes made on the fly: bounded
        _KINDS.clear()
    _KINDS[id(t)] = (t, kind)
    return kind


def _patch_backward(torch: ModuleType) -> None:
    cls = torch.Tensor
    plain = cls.backward
    if getattr(plain, _MARK, False):
        return

    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            follow(self)
        except Exception as exc:
            t = state.tracer
            if t is not None:
                t.error(exc)
        return plain(self, *args, **kwargs)

    backward.__wrapped__ = plain  # type: ignore[attr-defined]
    backward.__doc__ = plain.__doc__
    setattr(backward, _MARK, True)
    cls.backward = backward


def follow(loss: Any) -> None:
    """Record a hop from each stage whose noted tensors the loss's graph reaches."""
    t = state.tracer
    root = getattr(loss, "grad_fn", None)
    if t is None or root is None:
        return
    held: list[Any] = [root]  # every node seen stays alive for the walk: ids stay unique
    index: dict[int, list[tuple[str, str, str, Any]]] = {}
    with _lock:  # dead tensors leave the list here: every backward would scan them again
        alive = [entry for entry in _noted if entry[0]() is not None]
        _noted.clear()
        _noted.extend(alive)
    for ref, owner, name, handed_to in alive:
        x = ref()
        g = None if x is None else x.grad_fn
        if g is not None:
            held.append(g)
            index.setdefault(id(g), []).append((owner, name, handed_to, x))
    if not index:
        return
    found: dict[tuple[str, str, str], list[Any]] = {}
    seen = {id(root)}  # a node is queued once, when first met
    todo = [root]
    budget = MAX_NODES
    while todo and budget:
        g = todo.pop()
        budget -= 1
        hits = index.get(id(g))
        if hits:
            for owner, name, handed_to, x in hits:
                found.setdefault((owner, name, handed_to), []).append(x)
            continue
        for nxt, _ in g.next_functions:
            if nxt is not None and id(nxt) not in seen:
                seen.add(id(nxt))
                held.append(nxt)
                todo.append(nxt)
    if not found:
        return
    learner = _learner()
    for (owner, name, handed_to), tensors in found.items():
        if learner in (owner, handed_to):
            continue  # its own tensors, or ones its seam already handed to the learner
        # one payload per producer: the tensors it handed over, however they were kept
        unique = list({id(x): x for x in tensors}.values())
        t.hop(src=owner, dst=learner, payload={name: unique}, name=name, items=(), step=None,
              version=None, transport="ref", dims=None)


def _learner() -> str:
    """The owner that learns: the owner running `backward()` (a seam's body, an `owner()`
    block, a process with a role such as a rank); in a process nobody named, the script's
    function calling it, unless that is the driver; then the optimizer's step; else
    `backward`."""
    from flowmap.capture.api import current_owner

    owner = current_owner()
    if owner != _UNNAMED:
        return owner  # a seam's body, an `owner()` block, or a process with a role (a rank)
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith(_FLOWMAP_DIR) or
                                 _is_library(frame)):
        frame = frame.f_back
    if frame is not None and not _is_driver(frame):
        name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
        return str(name).rsplit(".<locals>.", 1)[-1]  # a nested function by its own name
    from flowmap.integrations import optimizer_steps

    counted = optimizer_steps.counted()
    return counted[1].rsplit(".", 2)[-2] + ".step" if counted else "backward"


def _is_library(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    return isinstance(name, str) and name.split(".", 1)[0] in ("torch", "accelerate")


def _is_driver(frame: FrameType) -> bool:
    """The script's top-level code, or the function it calls to run everything (`main`)."""
    code = frame.f_code
    if code.co_name == "<module>":
        return True
    back = frame.f_back
    return back is not None and back.f_code.co_name == "<module>" and \
        back.f_globals.get("__name__") == "__main__"
