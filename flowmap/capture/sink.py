"""Where a process's events go, chosen once as tracing starts.

Streamed (`Stream`, the default): every event is written to the shard as it comes.
Folded (`flowmap trace --aggregate`, `fold.ProcessFolder`): past a detail window,
events are summed per seam and step, and the sums written at each step's end. Each
write call offers its event to the process's sink first, and writes it only when the
sink did not take it (True: folded), so no write call asks which mode runs or reads
the folder's state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the describers load at the first hop, not with the tracer
    from flowmap.capture.describe import Description


class Sink(Protocol):
    """What a write call asks before it writes: whether the sink took the event."""

    def hop(self, src: str, dst: str, name: str, d: Description, items: Any, step: Any,
            version: Any, transport: str, t_us: int, nbytes: int | None = None,
            exact_step: bool = False) -> bool: ...

    def send_half(self, src: str, dst: str, name: str, d: Description, nbytes: int,
                  transport: str, channel: str, wire: int | None, t_us: int,
                  step: int | None) -> bool: ...

    def receive_half(self, owner: str, name: str, transport: str, channel: str,
                     wire: int | None, t_us: int) -> bool: ...

    def counter(self, owner: str, name: str, value: float, t_us: int) -> bool: ...

    def mark(self, owner: str, name: str, t_us: int) -> bool: ...

    def drop(self, owner: str, reason: str, n_items: int, t_us: int) -> bool: ...

    def past_detail(self) -> bool:
        """Whether events now come past the detail window (per-hop detail is not written)."""
        ...

    def step_moved(self, step: int) -> None:
        """The process's step was set (lock held)."""
        ...

    def write(self) -> None:
        """Write what is held (lock held): the shard is closing."""
        ...


class Stream:
    """The sink that takes nothing: every event is written as it comes."""

    def hop(self, src: str, dst: str, name: str, d: Description, items: Any, step: Any,
            version: Any, transport: str, t_us: int, nbytes: int | None = None,
            exact_step: bool = False) -> bool:
        return False

    def send_half(self, src: str, dst: str, name: str, d: Description, nbytes: int,
                  transport: str, channel: str, wire: int | None, t_us: int,
                  step: int | None) -> bool:
        return False

    def receive_half(self, owner: str, name: str, transport: str, channel: str,
                     wire: int | None, t_us: int) -> bool:
        return False

    def counter(self, owner: str, name: str, value: float, t_us: int) -> bool:
        return False

    def mark(self, owner: str, name: str, t_us: int) -> bool:
        return False

    def drop(self, owner: str, reason: str, n_items: int, t_us: int) -> bool:
        return False

    def past_detail(self) -> bool:
        return False

    def step_moved(self, step: int) -> None:
        pass

    def write(self) -> None:
        pass


STREAM: Sink = Stream()
