"""Bytes spent on padding in leaves that ride with a mask of the same leading shape.

The padded fraction comes from a counter the pipeline reports
(`padding/<payload>` or `padding/<payload>/<mask path>`, 0..1), else from the
mask's positions before each row's trailing zeros, which the tracer counted on
hops that moved it (a small CPU mask, `flowmap.capture.leaf_notes`) or sampled
(`--values`), else it is estimated from the unpadded leaves that carried the
same items earlier (see `flowmap.findings.lengths`). Only trailing zeros are
padding: a mask that zeroes prompt tokens inside a packed row (`[1, N]` with
`cu_seqlens`) marks no padding, nor does a response mask's tail of tool tokens where
another mask of the same rows, as long or longer, marks every position real (an
attention mask of ones: the rows are full).

Padding no mask marks is seen only with `flowmap trace --values`
(`flowmap.findings.padding_values`): the zero tails of `[rows, positions]`
arrays, or a Python list of lengths beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flowmap.findings import padding_values, value_figures
from flowmap.findings.common import (
    PADDING,
    Finding,
    RoleKey,
    norm_path,
    per_step,
    role_key,
)
from flowmap.findings.lengths import UnpaddedLengths
from flowmap.model.format import role_label
from flowmap.model.types import ARRAY_KINDS, ITEMSIZE, LeafStats, SeamKey, SeamStats
from flowmap.read.halves import UNTRACED

if TYPE_CHECKING:
    from flowmap.model.view import RunView

MIN_PERCENT = 1.0  # of the masked bytes: less padding than this is no finding
MaskGroup = tuple[list[LeafStats], list[LeafStats]]  # (masks of a shape, the leaves they mask)


@dataclass(slots=True)
class _Padded:
    """One role-level seam's padding, summed over its owner-level seams."""

    bytes_per_step: float = 0.0  # spent on padding
    masked_bytes_per_step: float = 0.0  # of all its masked leaves
    labels: set[str] = field(default_factory=set)
    methods: set[str] = field(default_factory=set)  # "counter", "mask", "estimate"


def detect(view: RunView) -> list[Finding]:
    noted = {(n.src, n.name, n.path) for sh in view.events.shards for n in sh.notes
             if n.real is not None}  # masks the tracer counted, named so or not
    masked: dict[SeamKey, list[MaskGroup]] = {
        key: groups for key, s in view.seams.items() if (groups := _mask_groups(s, noted))}
    found: dict[RoleKey, _Padded] = {}
    if value_figures.sampled(view):
        for key, s in view.seams.items():
            if key in masked:
                continue
            got = padding_values.padded_bytes(view, s)
            if got is not None:
                entry = found.setdefault(role_key(key), _Padded())
                entry.bytes_per_step += got[0]
                entry.masked_bytes_per_step += got[1]
                entry.labels.add(s.label)
                entry.methods.add(got[2])
    if not masked and not found:
        return []
    lengths = UnpaddedLengths(view, set(masked))
    for key, groups in masked.items():
        s = view.seams[key]
        full = [m for masks, _ in groups for m in masks if _noted_fraction(view, s, m) == 0.0]
        for masks, leaves in groups:
            if _rows_full(full, masks):
                continue
            # masks of one shape (attention, loss): the one that marks most positions real
            # says what is padding; the others also zero what is real but not trained
            fractions = [f for mask in masks
                         if (f := _fraction(view, s, mask, leaves, lengths)) is not None]
            if not fractions:
                continue
            fraction, method = min(fractions)
            masked_bps = sum(leaf.total_bytes for leaf in leaves) / view.num_steps
            entry = found.setdefault(role_key(key), _Padded())
            entry.bytes_per_step += masked_bps * fraction
            entry.labels.add(s.label)
            entry.masked_bytes_per_step += masked_bps
            entry.methods.add(method)
    out = []
    for rk, p in found.items():
        how = ("reported" if p.methods == {"counter"} else
               "counted from the mask" if p.methods == {"mask"} else
               f"read from {padding_values.SAY[next(iter(p.methods))]} sampled with --values"
               if len(p.methods) == 1 and next(iter(p.methods)) in padding_values.SAY
               else "estimated")
        bps = p.bytes_per_step
        pct = 100 * bps / p.masked_bytes_per_step if p.masked_bytes_per_step else 0.0
        which = "masked leaves" if p.methods & {"counter", "mask", "estimate", "values"} \
            else "padded leaves"
        if pct < MIN_PERCENT:  # sequences nearly as long as their batch: nothing to pack
            continue
        out.append(Finding(
            PADDING, sorted(p.labels), bps,
            f"`{role_label(rk)}` spends about {per_step(bps)} on padding ({pct:.0f}% of its {which}, "
            f"{how}): pack sequences (cu_seqlens) or pad to the batch's longest, not "
            "a fixed length.",
        ))
    return out


def _fraction(view: RunView, s: SeamStats, mask: LeafStats, leaves: list[LeafStats],
              lengths: UnpaddedLengths) -> tuple[float, str] | None:
    """(padded fraction, method) of one mask, from the best evidence there is."""
    fraction, method = _counter_fraction(view, s.name, mask.path), "counter"
    if fraction is None:
        fraction, method = _noted_fraction(view, s, mask), "mask"
    if fraction is None:
        fraction, method = _sampled_fraction(view, s, mask), "values"
    if fraction is None:
        fraction, method = lengths.padded_fraction(s, leaves), "estimate"
    return None if fraction is None else (fraction, method)


def _rows_full(full: list[LeafStats], masks: list[LeafStats]) -> bool:
    """Whether a mask counted all ones covers the rows of `masks` (the same rows, as many
    positions or more): its rows hold no padding, whatever zeros the others have."""
    return any(f not in masks and len(f.shape) == len(m.shape) == 2 and f.shape[0] == m.shape[0]
               and isinstance(f.shape[1], int) and isinstance(m.shape[1], int)
               and f.shape[1] >= m.shape[1] for f in full for m in masks)


def _is_mask(leaf: LeafStats, s: SeamStats, noted: set[tuple[str, str, str]]) -> bool:
    """A leaf named `*mask*`, or one the tracer counted as a mask (0s and 1s beside arrays
    of its leading dims, `flowmap.capture.leaf_notes`)."""
    if leaf.kind not in ARRAY_KINDS or len(leaf.shape) < 2:
        return False
    name = norm_path(leaf.path).rsplit(".", 1)[-1].lower()
    return "mask" in name or (s.src, s.name, leaf.path) in noted


def _mask_groups(s: SeamStats, noted: set[tuple[str, str, str]]) -> list[MaskGroup]:
    """(masks of one shape, the array leaves whose shape starts with theirs, the masks
    included) per shape."""
    by_shape: dict[tuple[object, ...], list[LeafStats]] = {}
    for mask in sorted((leaf for leaf in s.leaves if _is_mask(leaf, s, noted)),
                       key=lambda m: m.path):
        by_shape.setdefault(tuple(mask.shape), []).append(mask)
    out = []
    taken: set[str] = set()
    for prefix, masks in by_shape.items():
        leaves = [leaf for leaf in s.leaves if leaf.path not in taken and leaf.kind in ARRAY_KINDS
                  and tuple(leaf.shape[: len(prefix)]) == prefix]
        taken.update(leaf.path for leaf in leaves)
        out.append((masks, leaves))
    return out


def _noted_fraction(view: RunView, s: SeamStats, mask: LeafStats) -> float | None:
    """1 - real / padded positions of `mask`, from the counts the tracer noted on moved hops."""
    itemsize = ITEMSIZE.get(mask.dtype)
    if not itemsize:
        return None
    real = positions = 0
    for sh in view.events.shards:
        for n in sh.notes:
            if n.real is not None and n.path == mask.path and n.name == s.name and n.src == s.src \
                    and n.dst in (s.dst, UNTRACED):
                real += n.real
                positions += n.nbytes // itemsize
    if not positions:
        return None
    return min(1.0, max(0.0, 1 - real / positions))


def _sampled_fraction(view: RunView, s: SeamStats, mask: LeafStats) -> float | None:
    """The mask's zero tails over its elements, from values sampled with --values."""
    f = value_figures.of_seam(view, s).get(mask.path) if value_figures.sampled(view) else None
    return f.tail_fraction if f is not None else None


def _counter_fraction(view: RunView, name: str, mask_path: str) -> float | None:
    for counter in (f"padding/{name}/{mask_path}", f"padding/{name}"):
        c = view.counters.get(counter)
        if c is not None:
            return min(1.0, max(0.0, c.mean))
    return None
