"""Ids stored wider than their range: expert ids as int32 where 8 bits hold them.

prime-rl ships routed experts as uint8 (384 B/token for Qwen3-30B-A3B, a quarter
of int32's); sgl-project/sglang #31219 and verl #5240 send int32 or int64. An
integer array leaf is a finding when the range of its values is known, and a
narrower dtype holds it. The range comes from, in order:

1. **declared**: a counter `range/<leaf name>` the program records once, the
   number of values the ids take (`0..n-1`):
   `flowmap.counter("range/routed_experts", num_experts)`;
2. **a preset** (`--project`): a leaf whose last dimension is named `topk`
   holds expert ids, below the preset's `experts`;
3. **its own dims**: a leaf whose last dimension is named `index_topk` holds
   token positions, below the size of its `tokens` dimension (the projected
   one under `--project`); an unused slot may be -1, so the narrower dtype
   is signed;
4. **sampled values** (`flowmap trace --values`, which reads data): the least
   and largest value of an integer array seen on the seam's sampled hops, when
   they are `0..n-1` (or -1 for an unused slot) with n at most 256, so 8 bits
   hold them, and the dtype is at least four times wider: expert, action or
   class ids. Subword token ids and positions (more than 256 values: int16 or
   int32 would do) are a vocabulary or a length, not ids a cast at every hop
   should shrink; a byte-level vocabulary's ids fit uint8 and are flagged.
   Values 0 and 1 only are a mask (a `bool`, another claim), and all zeros
   say nothing about a range.

*At stake*: the leaf's bytes moved per step (not `ref`) times the share the
narrower dtype saves.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings import value_figures
from flowmap.findings.common import WIDE_IDS, Finding, leaf_name, per_step
from flowmap.model.types import ARRAY_KINDS, ITEMSIZE, LeafStats

if TYPE_CHECKING:
    from flowmap.model.view import RunView

INT_DTYPES = ("int16", "uint16", "int32", "uint32", "int64", "uint64", "long")
# (largest number of distinct ids 0..n-1 it holds, dtype), narrowest first
NARROW = ((256, "uint8"), (32_768, "int16"), (65_536, "uint16"), (1 << 31, "int32"))
# Positions padded with -1 (an unused top-k slot) need a signed dtype: n positions and -1.
NARROW_SIGNED = ((128, "int8"), (32_768, "int16"), (1 << 31, "int32"))
RANGE_COUNTER = "range/"


def detect(view: RunView) -> list[Finding]:
    at_stake: dict[tuple[str, str], float] = defaultdict(float)
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)
    why: dict[tuple[str, str], str] = {}
    for s in view.seams.values():
        figures = value_figures.of_seam(view, s) if value_figures.sampled(view) else {}
        for leaf in s.leaves:
            if leaf.dtype not in INT_DTYPES:
                continue
            bound = _bound(view, leaf)
            sampled = bound is None
            if sampled:
                bound = _sampled_bound(figures, leaf)
            if bound is None:
                continue
            n, source, signed = bound
            target = next((dt for most, dt in (NARROW_SIGNED if signed else NARROW) if n <= most),
                          None)
            if target is None or ITEMSIZE[target] >= ITEMSIZE[leaf.dtype]:
                continue
            if sampled and ITEMSIZE[target] * 4 > ITEMSIZE[leaf.dtype]:
                continue
            saved = 1 - ITEMSIZE[target] / ITEMSIZE[leaf.dtype]
            moved = leaf.total_bytes / view.num_steps * s.moved_fraction
            if moved <= 0:
                continue
            key = (leaf_name(leaf.path) or s.name, leaf.dtype)
            at_stake[key] += moved * saved
            labels[key].add(s.label)
            # -1-padded positions take n + 1 values: say which, not a count off by one
            values = f"are {source}" if signed else f"take {n:,} values ({source})"
            why[key] = f"its ids {values}: {target} holds them"
    # one finding per seams: each leaf's claim in it (the same seams twice would read as
    # one claim said again, `flowmap.findings._said`)
    by_seams: dict[tuple[str, ...], list[tuple[str, str]]] = defaultdict(list)
    for key in at_stake:
        by_seams[tuple(sorted(labels[key]))].append(key)
    out = []
    for seams, keys in by_seams.items():
        bps = sum(at_stake[k] for k in keys)
        said = "; ".join(f"`{k[0]}` is sent as {k[1]} but {why[k]}" for k in keys)
        out.append(Finding(WIDE_IDS, list(seams), bps,
                           f"{said}; cast before sending and back after, {per_step(bps)} spared."))
    return out


def _sampled_bound(figures: dict[str, value_figures.Figures],
                   leaf: LeafStats) -> tuple[int, str, bool] | None:
    """The range the sampled values show (`trace --values`), or None."""
    f = figures.get(leaf.path)
    if f is None or leaf.kind not in ARRAY_KINDS or f.max < 2 or f.max > 255 or f.min < -1:
        return None
    n = int(f.max) + 1
    if f.min < 0:
        return n, f"values sampled with --values: -1..{int(f.max):,}", True
    return n, f"values sampled with --values: 0..{int(f.max):,}", False


def _bound(view: RunView, leaf: LeafStats) -> tuple[int, str, bool] | None:
    """(how many values the leaf's ids take, where that comes from, whether -1 pads it), or None."""
    declared = view.counters.get(RANGE_COUNTER + leaf_name(leaf.path))
    if declared is not None and declared.max >= 1:
        return int(declared.max), f"`range/{leaf_name(leaf.path)}` declared", False
    dims = leaf.dims or ()
    if not dims or len(dims) != len(leaf.shape):
        return None
    if dims[-1] == "topk" and view.projection is not None and "experts" in view.projection.sizes:
        experts = view.projection.sizes["experts"]
        return experts, f"`experts={experts}` in the preset", False
    if dims[-1] == "index_topk" and "tokens" in dims:
        tokens = leaf.shape[dims.index("tokens")]
        n = tokens[1] if isinstance(tokens, tuple) else tokens
        return int(n), f"token positions 0..{n - 1:,} (its `tokens` dim) or -1", True
    return None



