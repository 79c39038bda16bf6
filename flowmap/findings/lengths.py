"""Real (unpadded) elements of the items each padded seam carries, read on other seams.

A padded leaf `input_ids [B, T]` is matched by name with the unpadded
sequences of the same items elsewhere (`input_ids [L]` of each trajectory, or
a list `[*].input_ids[*]`); a hop's elements are shared evenly among its
items, and the seam that saw the most of them is the evidence. A padded seam
without item ids falls back to the seams into its sender. One pass over the
hops, whatever the number of padded seams.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import leaf_name
from flowmap.model.types import ARRAY_KINDS, ITEMSIZE, ItemId, LeafStats, SeamKey, SeamStats
from flowmap.read.events import Leaf

if TYPE_CHECKING:
    from flowmap.model.view import RunView

SCALAR_KINDS = ("int", "float", "bool")
Source = tuple[SeamKey, str]  # (seam the sequences rode, leaf name)


def sequences(leaves: tuple[Leaf, ...]) -> list[tuple[str, float]]:
    """(name, elements) of the leaves that hold sequences unpadded.

    A 1-D tensor or array (`input_ids [L]`), or a folded list of numbers
    (`[*].response_token_ids[*]`, whose count is its number of elements).
    """
    out = []
    for leaf in leaves:
        if leaf.kind in ARRAY_KINDS and len(leaf.shape) == 1 and leaf.dtype in ITEMSIZE:
            out.append((leaf_name(leaf.path), leaf.nbytes / ITEMSIZE[leaf.dtype]))
        elif leaf.kind in SCALAR_KINDS and leaf.path.endswith("[*]"):
            out.append((leaf_name(leaf.path), float(leaf.count)))
    return out


class UnpaddedLengths:
    """Per padded seam, the real elements of its items, by the seam and leaf they were seen on."""

    def __init__(self, view: RunView, padded: set[SeamKey]) -> None:
        where: dict[ItemId, list[SeamKey]] = defaultdict(list)  # item -> padded seams carrying it
        self.has_items: set[SeamKey] = set()
        for h in view.events.hops:
            if h.items and (seam := (h.src, h.dst, h.name)) in padded:
                self.has_items.add(seam)
                for item in h.items:
                    where[item].append(seam)
        for item, seams in where.items():
            where[item] = sorted(set(seams))
        self.real: dict[SeamKey, dict[Source, float]] = defaultdict(lambda: defaultdict(float))
        self.totals: dict[Source, float] = defaultdict(float)
        by_schema: dict[int, list[tuple[str, float]]] = {}  # schemas are shared tuples
        for h in view.events.hops:
            seqs = by_schema.get(id(h.leaves))
            if seqs is None:
                seqs = by_schema[id(h.leaves)] = sequences(h.leaves)
            if not seqs:
                continue
            seam = (h.src, h.dst, h.name)
            for name, n in seqs:
                self.totals[(seam, name)] += n
            for item in h.items:
                for target in where.get(item, ()):
                    acc = self.real[target]
                    for name, n in seqs:
                        acc[(seam, name)] += n / len(h.items)

    def padded_fraction(self, s: SeamStats, leaves: list[LeafStats]) -> float | None:
        """1 - real/padded elements of the heaviest leaf with evidence; None without any."""
        evidence = self._evidence(s)
        for leaf in sorted(leaves, key=lambda x: (-x.total_bytes, x.path)):
            dtype = leaf.dtypes[0] if len(leaf.dtypes) == 1 else ""
            name = leaf_name(leaf.path)
            real = max((n for (src, nm), n in evidence.items() if nm == name and src != s.key),
                       default=0.0)
            if dtype in ITEMSIZE and real > 0:
                padded = leaf.total_bytes / ITEMSIZE[dtype]
                return 1 - real / padded if real < padded else None
        return None

    def _evidence(self, s: SeamStats) -> dict[Source, float]:
        if s.key in self.has_items:
            return self.real.get(s.key, {})
        return {k: n for k, n in self.totals.items() if k[0][1] == s.src and k[0][0] != s.src}
