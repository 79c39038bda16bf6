"""JSON out, strictly as RFC 8259 allows: no NaN, no Infinity.

Python's `json` writes bare `NaN`/`Infinity` by default, which no strict
parser (browsers' `JSON.parse`, jq, Go, Rust) accepts. Every JSON flowmap
writes goes through `finite` first: a non-finite float becomes null, and the
encoder is then told to refuse any that slipped through.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(doc: Any) -> Any:
    """`doc` with every NaN or infinite float replaced by None (containers copied)."""
    t = type(doc)
    if t is float:
        return doc if math.isfinite(doc) else None
    if t is dict:
        return {k: finite(v) for k, v in doc.items()}
    if t is list or t is tuple:
        return [finite(v) for v in doc]
    return doc


def dumps(doc: Any, **kwargs: Any) -> str:
    """`json.dumps` of `finite(doc)` with `allow_nan=False`.

    Most documents hold no non-finite float: they are written as they are, in C, and only
    one the encoder refuses is copied through `finite` (a live page's data is written at
    every update, and the copy cost more than the writing)."""
    try:
        return json.dumps(doc, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(doc), allow_nan=False, **kwargs)
