"""Text that fits a width: wrapping that never splits a figure, columns chosen by width.

rich wraps a too-narrow table cell mid-token (`pickle×6|0` reads as 6), so the
terminal report lays out its own lines: a number and its unit wrap as one
word, a label is shortened in the middle, and a column is dropped whole
rather than squeezed. Every line returned here is at most `width` cells.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len

ELLIPSIS = "…"
# A figure and the unit after it wrap together: `416 KiB/step`, `1.08 KiB`, `60 hops`.
_GLUE = re.compile(r"(\d[\d.,]*) (B|KiB|MiB|GiB|TiB|hops?|steps?|items?|s|ms|µs)(?![\w])")
_NBSP = "\u00a0"


def wrap(text: str, width: int) -> list[str]:
    """Greedy word wrap at `width` cells; a figure stays with its unit, a long word is cut."""
    words = _GLUE.sub(lambda m: f"{m.group(1)}{_NBSP}{m.group(2)}", text).split(" ")
    lines: list[str] = []
    line = ""
    for word in (w for w in words if w):
        while cell_len(word) > width:  # a word longer than the line: cut it, but only here
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:width])
            word = word[width:]
        if not line:
            line = word
        elif cell_len(line) + 1 + cell_len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return [ln.replace(_NBSP, " ") for ln in lines] or [""]


def shorten(text: str, width: int) -> str:
    """`trainer/rank0 → gro…: all_reduce`: cut from the middle, keep both ends."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def shorten_parts(parts: Sequence[str], seps: Sequence[str], width: int) -> str:
    """`trainer/rank0 → weight_sync : st…ict`: cut the longest part first, so each stays told apart."""
    parts = list(parts)
    budget = width - sum(cell_len(s) for s in seps)
    lens = [cell_len(p) for p in parts]
    while sum(lens) > budget and max(lens) > 4:
        i = lens.index(max(lens))
        lens[i] -= 1
    parts = [shorten(p, n) for p, n in zip(parts, lens, strict=True)]
    text = parts[0] + "".join(s + p for s, p in zip(seps, parts[1:], strict=True))
    return shorten(text, width)


def wrap_parts(parts: Sequence[str], seps: Sequence[str], width: int, indent: int = 2) -> list[str]:
    """`replay_buffer → batch_assembly` / `  : zero_pad_sequences`: break between parts, not in one.

    A name cut in the middle (`repla…uffer`) is no longer recognisable; a label
    broken at its separators keeps every name whole wherever a name fits a line.
    Only a single part wider than the line is shortened, from its middle.
    """
    pieces = [parts[0]] + [s.lstrip() + p for s, p in zip(seps, parts[1:], strict=True)]
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and cell_len(line) + 1 + cell_len(piece) <= width:
            line += " " + piece
            continue
        if line:
            lines.append(line)
        prefix = " " * indent if lines else ""
        line = prefix + shorten(piece, width - len(prefix))
    lines.append(line)
    return lines


@dataclass(frozen=True)
class Column:
    """One column of a fitted table. `priority`: lower is kept longer as the width shrinks."""

    title: str
    cell: Callable[[Any], str]
    priority: int
    right: bool = True  # numbers right-aligned
    flexible: bool = False  # a label: takes the width left, shortened to fit
    min_width: int = 0
    fit: Callable[[Any, int], str] | None = None  # how a flexible cell shortens (default: middle)
    # how a flexible cell too long for its width breaks into lines (the row's figures stay on
    # its first); None: shortened on one line instead (`fit`)
    wrap: Callable[[Any, int], list[str]] | None = None


def fit_table(columns: Sequence[Column], rows: Sequence[Any], width: int,
              gap: int = 2) -> list[str]:
    """Header and rows, using the columns that fit `width` (flexible ones shortened, not wrapped)."""
    cells = {c.title: [c.cell(r) for r in rows] for c in columns}
    natural = {c.title: max([cell_len(c.title)] + [cell_len(v) for v in cells[c.title]])
               for c in columns}
    need = {c.title: (min(natural[c.title], max(c.min_width, cell_len(c.title)))
                      if c.flexible else natural[c.title]) for c in columns}
    kept: list[Column] = []
    for c in sorted(columns, key=lambda c: c.priority):
        trial = kept + [c]
        if sum(need[k.title] for k in trial) + gap * (len(trial) - 1) <= width:
            kept.append(c)
    shown = [c for c in columns if c in kept]
    spare = width - sum(need[c.title] for c in shown) - gap * (len(shown) - 1)
    widths = {}
    for c in shown:
        w = need[c.title]
        if c.flexible and spare > 0:
            extra = min(spare, natural[c.title] - w)
            w += extra
            spare -= extra
        widths[c.title] = w

    def line(values: Sequence[str], row: object = None) -> list[str]:
        parts = []
        more: dict[int, list[str]] = {}  # column index -> its continuation lines
        for i, (c, v) in enumerate(zip(shown, values, strict=True)):
            w = widths[c.title]
            if c.wrap is not None and row is not None and cell_len(v) > w:
                v, *more[i] = c.wrap(row, w)
            elif c.fit is not None and row is not None and cell_len(v) > w:
                v = c.fit(row, w)
            v = shorten(v, w)
            pad = " " * (w - cell_len(v))
            parts.append(pad + v if c.right else v + pad)
        out = [(" " * gap).join(parts).rstrip()]
        for k in range(max(map(len, more.values()), default=0)):
            cont = [shorten(more[i][k], widths[c.title]) if i in more and k < len(more[i]) else ""
                    for i, c in enumerate(shown)]
            out.append((" " * gap).join(v.ljust(widths[c.title]) for v, c in zip(cont, shown, strict=True))
                       .rstrip())
        return out

    out = line([c.title for c in shown])
    for i in range(len(rows)):
        out += line([cells[c.title][i] for c in shown], rows[i])
    return out
