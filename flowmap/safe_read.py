"""Read the small files flowmap is given (seam maps, budgets, baselines, run.json) safely.

These files come from users and from disk, and a reader must answer a bad
one with one sentence, never a traceback, a hang or a memory blow-up: so
only regular files are read (a FIFO would block forever, /dev/zero never
ends), up to `MAX_BYTES`; text must be UTF-8 (binary or UTF-16 input is named
as such); and documents nested deeper than `MAX_DEPTH` — which would make
the parsers or our own walks recurse without bound — are refused.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from flowmap.errors import UsageError

MAX_BYTES = 64 << 20
MAX_DEPTH = 64
MAX_YAML_NODES = 1_000_000

_BOMS = {b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16", b"\x00\x00\xfe\xff": "UTF-32"}


def read_text(path: str, what: str) -> str:
    """The UTF-8 text of the regular file `path`; UsageError naming `what` otherwise.

    FileNotFoundError passes through, for callers that give their own advice.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"cannot read the {what} {path}: it is not a regular file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise UsageError(f"cannot read the {what} {path}: it is over {MAX_BYTES >> 20} MiB")
    return decode(data, path, what)


def decode(data: bytes, path: str, what: str) -> str:
    """`data` as UTF-8 text (a UTF-8 BOM is dropped), or one sentence on what it is instead."""
    for bom, name in _BOMS.items():
        if data.startswith(bom):
            raise UsageError(f"cannot read the {what} {path}: it is {name} text; save it as UTF-8")
    if b"\x00" in data[:4096]:
        raise UsageError(f"cannot read the {what} {path}: it is binary (or UTF-16) data, not UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"cannot read the {what} {path}: it is not UTF-8 text (line {line}); save it as UTF-8"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def too_deep(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists/dicts in `doc` nest deeper than `limit` (checked without recursion)."""
    stack = [(doc, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, list):
            continue
        if d >= limit:
            return True
        stack.extend((x, d + 1) for x in v if isinstance(x, (list, dict)))
    return False


def load_json(text: str, path: str, what: str) -> Any:
    """Parse strict JSON (no NaN/Infinity) no deeper than MAX_DEPTH; ValueError if invalid,
    UsageError if too deep."""
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float,
                         parse_int=_int64)
    except RecursionError:
        raise UsageError(f"the {what} {path} is nested too deep (over {MAX_DEPTH} levels)") from None
    if too_deep(doc):
        raise UsageError(f"the {what} {path} is nested too deep (over {MAX_DEPTH} levels)")
    return doc


def _int64(text: str) -> int:
    if len(text) > 20:  # past any int64: a 400-digit number would overflow every float
        raise ValueError(f"{text[:20]}... is out of range")
    return int(text)


def _finite_float(text: str) -> float:
    v = float(text)
    if v - v != 0.0:  # inf (NaN cannot be written as a number)
        raise ValueError(f"{text[:20]} is out of range")
    return v


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_yaml(text: str, path: str, what: str) -> None:
    """Refuse YAML nested deeper than MAX_DEPTH or expanding to too many nodes (aliases).

    Runs PyYAML's event parser, which does not recurse, before the composer,
    which does. Syntax errors are left to the real parse, which names the line.
    """
    import yaml

    anchors: dict[str, int] = {}
    stack: list[list[Any]] = [[None, 0]]  # [anchor, values so far] per open collection
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                stack.append([ev.anchor, 1])
                if len(stack) - 1 > MAX_DEPTH:
                    raise UsageError(f"the {what} {path} is nested too deep "
                                     f"(over {MAX_DEPTH} levels, line {_line(ev)})")
                continue
            if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                anchor, n = stack.pop()
                if anchor:
                    anchors[anchor] = n
            elif isinstance(ev, yaml.ScalarEvent):
                n = 1
                if ev.anchor:
                    anchors[ev.anchor] = 1
            elif isinstance(ev, yaml.AliasEvent):
                n = anchors.get(ev.anchor or "", 1)
            else:
                continue
            stack[-1][1] += n
            if sum(v for _, v in stack) > MAX_YAML_NODES:
                raise UsageError(f"the {what} {path} expands to over {MAX_YAML_NODES} values "
                                 "(aliases); that is not a real one")
    except yaml.YAMLError:
        return


def _line(ev: Any) -> str:
    """The 1-based line a YAML event starts on ("?" where the parser kept no mark)."""
    mark = ev.start_mark
    return "?" if mark is None else str(mark.line + 1)
