"""Value figures of sampled hops, only under `flowmap trace --values` (this reads data).

Some waste cannot be seen from metadata: ids stored wider than the values they
take, padding that no mask marks (zero tails, a Python list of lengths). With
`--values` (environment `FLOWMAP_VALUES=1`, set by the CLI for the program and
its children) a sampler reads, on a few hops, small figures per leaf:
`[path, min, max, sum, zero_tail, elements, filled]`:

- `zero_tail`: the elements in each row's run of trailing zeros along the
  sequence dimension (dim 1 of an array of two or more dims, dim 0 of a vector),
  summed over rows and lists, or of leading zeros where a batch's rows all end
  filled (left padding, `leaf_notes.real_positions`); null for Python numbers;
- `sum`: the sum of a Python list of numbers (`lengths[*]`) or of a short integer
  vector (`seq_lens [B]`); null for other arrays;
- `filled`: the elements at positions that hold something (not zero), as `zero_tail`
  counts them: a length mask or ids fill the rows up to their tails, an event flag
  (`dones`, zero but where an episode ends) does not; null for Python numbers.

The sampler keeps it off the hot path: it reads the first hop of each seam,
then, up to `FIRST_PER_SEAM`, and one in `EVERY` after, only while the time it
has spent reading stays under `BUDGET` of the time since it started (a counter
per seam and a clock read are the only cost on hops it skips), so a program
that sends many large messages pays at most that share; only host arrays (a device tensor would synchronise the
program with its accelerator), each of at most `MAX_ELEMENTS`, at most
`MAX_LEAVES` per hop, walking dicts, lists, tuples and plain objects' `__dict__`
without calling the user's code. Nothing is copied or pickled; a figure is a few
numbers. Without `--values` none of this runs: `enabled()` is one global read.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from typing import Any

from flowmap import environment

ENV = environment.VALUES
FIRST_PER_SEAM = 4
EVERY = 16
BUDGET = 0.02  # of the wall time since the first sample: reading values costs at most this
MAX_ELEMENTS = 1 << 22
MAX_LEAVES = 32
MAX_DEPTH = 4
MAX_LIST = 4096  # elements of a Python list read for its figures

Figure = list[Any]  # [path, min, max, sum, zero_tail, elements, filled]

_ON = environment.get(ENV) == "1"
_seen: defaultdict[tuple[str, str, str], int] = defaultdict(int)


def enabled() -> bool:
    return _ON


def set_enabled(on: bool) -> None:
    """Turn sampling on in this process and, through the environment, in its children."""
    global _ON
    _ON = on
    if on:
        os.environ[ENV] = "1"
    else:
        os.environ.pop(ENV, None)


_clock = {"start": 0.0, "spent": 0.0}


def due(src: str, dst: str, name: str) -> bool:
    """Whether this hop of the seam is one the sampler reads."""
    key = (src, dst, name)
    n = _seen[key]
    _seen[key] = n + 1
    if n == 0:
        return True
    if n >= FIRST_PER_SEAM and n % EVERY:
        return False
    return _clock["spent"] <= BUDGET * (time.perf_counter() - _clock["start"])


def sample(payload: Any) -> list[Figure]:
    """`figures(payload)`, its time charged to the budget."""
    t0 = time.perf_counter()
    if not _clock["start"]:
        _clock["start"] = t0
    try:
        return figures(payload)
    finally:
        _clock["spent"] += time.perf_counter() - t0


def figures(payload: Any) -> list[Figure]:
    """The value figures of the host arrays and number lists of `payload`; never raises."""
    acc: dict[str, list[Any]] = {}
    try:
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        if torch is not None and torch._C._is_torch_function_mode_enabled():
            with torch._C.DisableTorchFunction():
                _walk(torch, np, payload, "", 0, acc)
        else:
            _walk(torch, np, payload, "", 0, acc)
    except Exception:
        return []
    return [[path, *fig] for path, fig in acc.items() if _finite(fig)]


def _finite(fig: list[Any]) -> bool:
    """Strict JSON only: a NaN or infinity in a float array leaves its figure out."""
    return all(x is None or -1e300 < x < 1e300 for x in fig[:3])


def _walk(torch: Any, np: Any, obj: Any, path: str, depth: int, acc: dict[str, list[Any]]) -> None:
    if len(acc) >= MAX_LEAVES and path not in acc:
        return
    t = type(obj)
    if torch is not None and (t is torch.Tensor or t is torch.nn.Parameter):
        if obj.is_cpu and obj.numel() <= MAX_ELEMENTS and obj.layout == torch.strided:
            _merge(acc, path, _array(np, obj.detach().numpy() if obj.dtype != torch.bfloat16
                                     else obj.detach().float().numpy()))
        return
    if np is not None and t is np.ndarray:
        if obj.size <= MAX_ELEMENTS and obj.dtype.kind in "biuf":
            _merge(acc, path, _array(np, obj))
        return
    if depth >= MAX_DEPTH:
        return
    if t is dict:
        for k, v in list(obj.items())[:MAX_LEAVES * 4]:
            if type(k) is str:
                _walk(torch, np, v, f"{path}.{k}" if path else k, depth + 1, acc)
        return
    if t is list:
        if obj and all(type(x) in (int, float) for x in obj[:MAX_LIST]):
            nums = obj[:MAX_LIST]
            _merge(acc, f"{path}[*]", [min(nums), max(nums), sum(nums), None, len(nums), None])
            return
        for x in obj[:MAX_LIST]:
            _walk(torch, np, x, f"{path}[*]", depth + 1, acc)
        return
    if t is tuple:
        for i, x in enumerate(obj[:MAX_LEAVES]):
            _walk(torch, np, x, f"{path}[{i}]", depth + 1, acc)
        return
    if t in (int, float, str, bytes, bool) or obj is None:
        return
    from flowmap.capture.describers import introspect  # loaded at the first sample: boot stays lean

    d = introspect.instance_dict(obj)
    if d is not None:
        for k, v in list(dict.items(d))[:MAX_LEAVES * 4]:
            if type(k) is str:
                _walk(torch, np, v, f"{path}.{k}" if path else k, depth + 1, acc)


def _array(np: Any, a: Any) -> list[Any]:
    """[min, max, None, zero-tail elements, elements, filled elements] of one host array."""
    if a.size == 0:
        return [0, 0, None, 0, 0, 0]
    lo, hi = a.min().item(), a.max().item()
    if type(lo) is bool:
        lo, hi = int(lo), int(hi)
    if a.ndim == 1:
        nz = np.flatnonzero(a)
        tail = a.size - (int(nz[-1]) + 1 if nz.size else 0)
        if a.dtype.kind in "iu" and a.size <= MAX_LIST:  # lengths may come as a vector
            return [lo, hi, int(a.sum()), tail, int(a.size), int(nz.size)]
        filled = int(nz.size)
    else:
        from flowmap.capture.leaf_notes import real_positions  # loaded at the first sample

        nz = (a.reshape(a.shape[0], a.shape[1], -1) != 0).any(axis=2)  # a position holds something
        per_position = a.size // (a.shape[0] * a.shape[1]) if a.shape[1] else 0
        tail = (nz.size - real_positions(np, nz)) * per_position
        filled = int(nz.sum()) * per_position
    return [lo, hi, None, tail, int(a.size), filled]


def _merge(acc: dict[str, list[Any]], path: str, fig: list[Any]) -> None:
    old = acc.get(path)
    if old is None:
        acc[path] = fig
        return
    old[0] = min(old[0], fig[0])
    old[1] = max(old[1], fig[1])
    old[2] = None if old[2] is None or fig[2] is None else old[2] + fig[2]
    old[3] = None if old[3] is None or fig[3] is None else old[3] + fig[3]
    old[4] += fig[4]
    old[5] = None if old[5] is None or fig[5] is None else old[5] + fig[5]
