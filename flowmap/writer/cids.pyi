# Types of the C twin in cids.c (see encoder.py).
from typing import Any

def known_ids(table: dict[Any, tuple[str, Any]], keys: list[Any], /) -> str | None: ...
