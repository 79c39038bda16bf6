# Types of the C twin in ccolumns.c (see accel.py and columns.py).
from collections.abc import Callable
from typing import Any

def fold_columns(
    items: list[Any] | tuple[Any, ...], star: str, depth: int, fields_of: Callable[[type], Any],
    fields: Any = None, /,
) -> tuple[list[Any], int, int, list[int], int, int] | None: ...
def configure(
    max_depth: int, max_key: int, max_fields: int, max_scan: int, max_tuple: int,
    max_str_scan: int, numbers: list[tuple[type, str, int]], /,
) -> None: ...
