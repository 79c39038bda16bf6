"""`describe`, imported at the first hop rather than at start-up.

Every Python child of a traced run starts a tracer; one that never records a
hop (a resource tracker, a compile worker) should not pay for importing the
describers. The tracer calls `describe_lazy.describe`, which is the real
`describe` from its first call on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowmap.capture.describe import Description


def _first(payload: Any, dims: Mapping[str, tuple[str, ...]] | None = None) -> Description:
    """Import the describers, put the real `describe` in this one's place, describe."""
    global describe
    from flowmap.capture.describe import describe as loaded

    describe = loaded
    return loaded(payload, dims)


describe: Callable[[Any, Mapping[str, tuple[str, ...]] | None], Description] = _first
