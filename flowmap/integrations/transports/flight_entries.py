"""A Flight Recorder entry in flowmap's terms: its inputs' description and bytes, its group.

The reader (`flight.py`) decides when to read the ring and which entries are new;
this module only translates: c10d's dtype names into torch's, an entry's input sizes into
the leaves and bytes a hop carries, a group's ranks into its owner's name, and which
recorders this torch build has.
"""

from __future__ import annotations

from typing import Any

# c10d's ScalarType names whose torch name differs from the lower-cased one
_DTYPES = {"Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64",
           "Half": "float16", "Float": "float32", "Double": "float64", "ComplexHalf": "complex32",
           "ComplexFloat": "complex64", "ComplexDouble": "complex128"}


def describe_entry(sizes: list[list[int]], dtypes: list[str], device: str) -> tuple[Any, int]:
    """A description of an entry's inputs (one leaf per tensor), and their bytes."""
    from flowmap.capture.describe import Description

    d = Description(None)
    total = 0
    for i, shape in enumerate(sizes):
        dtype = torch_dtype(dtypes[i] if i < len(dtypes) else "")
        n = 1
        for dim in shape:
            n *= int(dim)
        nbytes = n * itemsize(dtype)
        total += nbytes
        d.add(("" if len(sizes) == 1 else f"[{i}]", "tensor", tuple(int(x) for x in shape),
               dtype, device, nbytes, 1, None))
    d.nbytes = total
    return d, total


def torch_dtype(scalar_type: str) -> str:
    """`Float` (c10's name) -> `float32` (torch's)."""
    return _DTYPES.get(scalar_type) or scalar_type.lower()


_sizes: dict[str, int] = {}


def itemsize(dtype: str) -> int:
    n = _sizes.get(dtype)
    if n is None:
        import torch

        t = getattr(torch, dtype, None)
        n = _sizes[dtype] = int(t.itemsize) if isinstance(t, torch.dtype) else 0
    return n


def ranks_text(ranks: list[int]) -> str:
    """`[0, 1]` -> `0,1`; `[0, 1, 2, 3, 8]` -> `0-3,8` (runs of three or more)."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ranks[i]}-{ranks[j]}")
        else:
            parts.extend(str(r) for r in ranks[i : j + 1])
        i = j + 1
    return ",".join(parts)


def recorders() -> list[tuple[str, Any]]:
    """The recorders this torch has: (device of its entries, dump function)."""
    import torch

    c = getattr(torch._C, "_distributed_c10d", None)
    found = []
    for device, fn in (("cpu", "_dump_fr_trace_json"), ("cuda", "_dump_nccl_trace_json")):
        dump = getattr(c, fn, None)
        if dump is not None:
            found.append((device, dump))
    return found
