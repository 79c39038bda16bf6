# Types of the C loops in cwalk.c (see accel.py).
from typing import Any

def tensor_entries(
    d: dict[Any, Any], tensor_type: type, readers: tuple[Any, ...],
    dtypes: dict[Any, tuple[str, int]], prefix: str, max_key: int,
    dims: Any, leaves: list[Any], pieces: list[Any], storages: list[Any], room: int,
    known: dict[str, Any], holders: list[Any], /,
) -> tuple[int, int]: ...
def disjoint_total(pieces: list[Any], /) -> int | None: ...
def array_data(a: Any, ndarray: type, /) -> int | None: ...
