"""Where a payload without tensors came from: text, and numbers, followed through stages.

Tensors are followed by their storages (`flowmap.model.flow`). Text has none: prompts
handed on leave a stage with the very figures they arrived with (each leaf's kind,
shape, bytes and count, whatever wraps them), and within one process the tracer names
the string and float objects a hop carried (`Hop.texts`, flowmap/capture/text_identity.py):
the same objects handed on are the same data, new ones were made by the stage that sends
them, whatever their figures. A payload that mixes what two stages made (prompts and
completions in one dict) comes from both, each its leaves' bytes (`parts`).
Numbers are followed by their objects only: a list of 16 advantages is shaped as the 16
rewards it came from, so figures alone tell nothing of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from flowmap.read.events import Hop

MAX_HELD = 64  # texts a stage is known to hold, the latest


@dataclass(slots=True)
class Text:
    """Text a stage got: who made it, the links that brought it, what it was."""

    made_by: str
    links: list[int]
    pid: int
    keys: frozenset[int]  # the ids of its objects in `pid` (empty: not known)
    figures: tuple[Any, ...]


def figures(h: Hop) -> tuple[tuple[Any, ...], bool] | None:
    """What a payload without tensors is made of (each leaf's kind, dtype, shape, bytes and
    count, whatever its path: a dict put around it on the way is the same text), and
    whether it holds strings; None for one with neither strings nor named objects."""
    strings = any(leaf.kind in ("str", "bytes") and leaf.nbytes for leaf in h.leaves)
    if not strings and not h.texts:
        return None
    return tuple(sorted((leaf.kind, leaf.dtype, repr(leaf.shape), leaf.nbytes, leaf.count)
                        for leaf in h.leaves)), strings


def sources(kept: list[Text], h: Hop, shape: tuple[Any, ...], strings: bool,
            makers: dict[tuple[int, int], str] | None = None,
            ) -> list[tuple[Text | None, frozenset[int]]]:
    """Where what `h` carries came from, of what `h.src` got (`kept`, oldest first): each
    source with the ids of `h`'s objects it holds; None: made by `h.src`. Objects `h.src`
    was never handed, but another stage sent before (`makers`: the stage that first sent
    each object, in its process), are that stage's: a single-controller script that sends
    on its local variable holds the very objects the stage that made them sent."""
    if h.texts:
        mine = set(h.texts)
        found: list[tuple[Text | None, frozenset[int]]] = []
        for got in reversed(kept):
            if got.pid == h.pid and got.keys and not got.keys.isdisjoint(mine):
                common = frozenset(got.keys & mine)
                found.append((got, common))
                mine -= common
                if not mine:
                    break
        if mine and makers:
            by: dict[str, set[int]] = {}
            for k in mine:
                maker = makers.get((h.pid, k))
                if maker is not None and maker != h.src:
                    by.setdefault(maker, set()).add(k)
            for maker, keys in by.items():
                found.append((Text(maker, [], h.pid, frozenset(keys), ()), frozenset(keys)))
                mine -= keys
        if found:
            if mine:
                found.append((None, frozenset(mine)))
            return found
        if not strings:
            return [(None, frozenset(h.texts))]  # numbers: their objects, or nothing
    # by figures: among what this process cannot tell apart by its objects
    for got in reversed(kept):
        if got.figures == shape and not (h.texts and got.pid == h.pid and got.keys):
            return [(got, frozenset(h.texts))]
    return [(None, frozenset(h.texts))]


def parts(h: Hop, found: list[tuple[Text | None, frozenset[int]]],
          shape: tuple[Any, ...]) -> list[tuple[float, tuple[Any, ...]]]:
    """Each source's share of `h`'s bytes, and the figures of its part: the leaves figured
    as those its source came with (prompts handed on beside completions made here are
    the prompts' bytes, however short the completions), the rest `h.src`'s. By the count
    of objects where the figures do not tell (a source's leaves merged into others)."""
    if len(found) < 2:
        return [(1.0, shape)] * len(found)
    left = Counter(shape)
    total = sum(f[3] for f in shape)
    out: list[tuple[float, tuple[Any, ...]]] = []
    for got, _ in found:
        if got is None:
            continue
        mine = []
        for f in got.figures:  # each of `h`'s leaves goes to one source only
            if left[f] > 0:
                left[f] -= 1
                mine.append(f)
        if not mine or not total:
            n = max(1, len(h.texts))
            return [(len(keys) / n, shape) for _, keys in found]
        out.append((sum(f[3] for f in mine) / total, tuple(mine)))
    rest = tuple(sorted(left.elements()))
    made_here = (sum(f[3] for f in rest) / total, rest)
    return [made_here if got is None else out.pop(0) for got, _ in found]


def receiver(h: Hop) -> Callable[[frozenset[int]], tuple[int, frozenset[int]]] | None:
    """For a transport hop whose receiver named the objects it unpickled: the receiver's
    process and ids for a set of the sender's ids (in the same order on both sides, the
    same walk of the same structure); None for a hop within a process."""
    if h.arrived is None or not h.arrived_texts:
        return None
    pid, there = h.arrived[0], h.arrived_texts
    if len(there) != len(h.texts):  # not known leaf by leaf: all of it, for each part
        return lambda keys: (pid, frozenset(there))
    to_there = dict(zip(h.texts, there))
    return lambda keys: (pid, frozenset(to_there[k] for k in keys if k in to_there))


def made(makers: dict[tuple[int, int], str], pid: int, keys: frozenset[int],
         maker: str) -> None:
    """Note that `maker` made the objects `keys` of process `pid`, unless another sent
    them first (`sources`' `makers`)."""
    for k in keys:
        makers.setdefault((pid, k), maker)


def beside(kept: list[Text], h: Hop, makers: dict[tuple[int, int], str] | None = None,
           ) -> Iterator[tuple[Text | None, tuple[int, frozenset[int]], str, int]]:
    """The strings and floats a hop of tensors carries beside them (scores as floats next to
    the sequences), by their objects only (a payload's figures are its tensors' too): each
    part's source (None: made by `h.src`), its ids where it arrives, who made it, and its
    share of the text's bytes."""
    text_bytes = sum(leaf.nbytes for leaf in h.leaves if leaf.kind in ("str", "bytes", "float"))
    found = sources(kept, h, (), False, makers)
    to_receiver = receiver(h)
    for got, keys in found:
        share = len(keys) / len(h.texts)
        held_as = to_receiver(keys) if to_receiver is not None else (h.pid, keys)
        yield got, held_as, got.made_by if got is not None else h.src, round(text_bytes * share)
