"""Calls of one function told apart by what they were given: which model, which mode.

One log-prob function computes the policy's log-probs for the rollout, the
reference model's for the KL term, and the policy's again, with gradients, for
the loss. Recorded under one owner, the three mix into one seam and the flow
cannot tell them apart. A seam map's `split_by` names the arguments (or
`self`) whose identity tells the calls apart, and `grad` for torch's grad mode;
each call's owner gets an instance named after what it was given:
`policy/model`, `policy/reference_model`, `policy/model+grad`.

An object is named by the name its caller holds it under (a local, an
attribute of the caller's `self`, a global), looked up once per object and
kept while the object lives; failing that, by the order it was first seen.
"""

from __future__ import annotations

import os
import sys
import weakref
from types import FrameType
from typing import Any

# flowmap's own frames (the wrapper, calls) stand between a seam and its caller
_FLOWMAP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
GRAD = "grad"


class Namer:
    """Names given objects for one seam; the cache holds no strong reference to them."""

    def __init__(self) -> None:
        self.names: dict[int, tuple[Any, str]] = {}  # id -> (weak ref or None, name)
        self.seen = 0

    def label(self, split_by: tuple[str, ...], bound: dict[str, Any]) -> str:
        """`model`, `ref_model+grad`, ...; "" when nothing to tell apart."""
        parts = [self.name(bound[a]) for a in split_by if a != GRAD and a in bound]
        text = ",".join(parts)
        if GRAD in split_by and _grad_enabled():
            text += "+grad"
        return text

    def name(self, obj: Any) -> str:
        key = id(obj)
        hit = self.names.get(key)
        if hit is not None and (hit[0] is None or hit[0]() is obj):
            return hit[1]
        self.seen += 1
        found = _held_as(obj) or f"#{self.seen}"
        try:
            ref: Any = weakref.ref(obj)
        except TypeError:
            return found  # not weakly referable: named anew each call, never cached wrong
        self.names[key] = (ref, found)
        return found


def _grad_enabled() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.is_grad_enabled())
    except Exception:
        return False


def _held_as(obj: Any) -> str | None:
    """The name the first frame outside flowmap holds `obj` under."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_FLOWMAP_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    scopes = [frame.f_locals]
    me = frame.f_locals.get("self")
    if me is not None and isinstance(getattr(me, "__dict__", None), dict):
        scopes.append(me.__dict__)
    scopes.append(frame.f_globals)
    for names in scopes:
        for k, v in list(names.items()):
            if v is obj and isinstance(k, str) and not k.startswith("__"):
                return k
    return None
