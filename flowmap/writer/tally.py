"""The per-seam accumulator of folded hops: one seam, one step, one transport.

Both folds add hops into it: the traced process under `--aggregate`
(`flowmap.capture.fold`, which writes it as an `a` or `X` line) and the reader
past its detail window (`flowmap.read.fold`, which turns it into a
`SeamStep`). Its fields are the figures those lines carry; it is updated once
per folded hop, so it is a slotted object with one short method.
"""

from __future__ import annotations


class HopTally:
    """Count, bytes, item ids, weight versions, wire bytes and times of the hops added."""

    __slots__ = ("hops", "nbytes_sum", "nbytes_min", "nbytes_max", "num_items", "version_min",
                 "version_max", "t_first", "t_last", "wire_bytes_sum")

    def __init__(self, nbytes: int, t: int, num_items: int, version: int | None,
                 wire_bytes: int | None) -> None:
        self.hops = 1
        self.nbytes_sum = self.nbytes_min = self.nbytes_max = nbytes
        self.num_items = num_items
        self.version_min = self.version_max = version
        self.t_first = self.t_last = t  # in the caller's unit (us in a trace, ns in a reader)
        self.wire_bytes_sum = wire_bytes

    def add(self, nbytes: int, t: int, num_items: int, version: int | None,
            wire_bytes: int | None) -> None:
        """One more hop; `version` or `wire_bytes` None: not known for this hop."""
        self.hops += 1
        self.nbytes_sum += nbytes
        if nbytes < self.nbytes_min:
            self.nbytes_min = nbytes
        elif nbytes > self.nbytes_max:
            self.nbytes_max = nbytes
        if t > self.t_last:
            self.t_last = t
        elif t < self.t_first:
            self.t_first = t
        self.num_items += num_items
        if version is not None:
            if self.version_min is None or version < self.version_min:
                self.version_min = version
            if self.version_max is None or version > self.version_max:
                self.version_max = version
        if wire_bytes is not None:
            self.wire_bytes_sum = wire_bytes + (self.wire_bytes_sum or 0)
