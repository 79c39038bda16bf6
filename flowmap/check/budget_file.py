"""Read a budget YAML file into typed limits, naming the file and line of every mistake.

    version: 1                      # optional
    seams:
      "rollout/* -> ready_buffer : trajectory":
        max_bytes_per_hop: 64 KiB
        max_bytes_per_step: 2 MB
        max_hops_per_step: 64
      "rollout -> weight_sync : paused":
        tolerance: 100 %            # against the baseline: overrides --tolerance for these seams
    counters:
      staleness: {max: 2}           # bare number: max/mean/last/count <= it, min >= it
      in_flight: ["min >= 1", "max <= 32"]
    # or as a list of expressions:   - staleness.max <= 2
    items:
      max_dropped: 5 %              # a percentage of all items, or a count (e.g. 3)
      max_dropped_by_reason: {stale: 2 %}
    total:
      max_bytes_per_step: 16 MB

A typo in a budget must not turn the gate silently green, so unknown keys and
duplicate keys are errors (exit 2) that say the key, the line and the keys
that would have been valid.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from flowmap.check.selectors import SeamSelector, parse_selector
from flowmap.check.tolerance import parse_fraction
from flowmap.check.yaml_lines import DuplicateKey, LineList, Lines, load_yaml
from flowmap.errors import UsageError
from flowmap.safe_read import check_yaml, read_text
from flowmap.units import parse_bytes

TOP_KEYS = ("counters", "items", "seams", "total", "version")
SEAM_KEYS = ("max_bytes_per_hop", "max_bytes_per_step", "max_hops_per_step", "tolerance")
TOTAL_KEYS = ("max_bytes_per_hop", "max_bytes_per_step")
ITEM_KEYS = ("max_dropped", "max_dropped_by_reason")
STATS = ("count", "last", "max", "mean", "min")
OPS = ("<=", ">=", "<", ">", "==")
_BOUND = re.compile(r"^\s*(<=|>=|<|>|==)?\s*(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$")
_STAT_BOUND = re.compile(r"^\s*(\w+)\s*(<=|>=|<|>|==)\s*(\S+)\s*$")
_EXPR = re.compile(r"^\s*(.+)\.(\w+)\s*(<=|>=|<|>|==)\s*(\S+)\s*$")


@dataclass(frozen=True, slots=True)
class Limit:
    """A limit and how the user wrote it (shown back in messages: "64 KB", not 64000)."""

    value: float
    text: str
    line: int
    is_fraction: bool = False  # for dropped items: a share of all items rather than a count


@dataclass(slots=True)
class SeamBudget:
    selector: SeamSelector
    limits: dict[str, Limit]
    line: int
    tolerance: float | None = None  # overrides --tolerance for the matched seams' baseline check


@dataclass(frozen=True, slots=True)
class CounterBound:
    counter: str
    stat: str
    op: str
    value: float
    line: int

    @property
    def text(self) -> str:
        return f"{self.stat} {self.op} {self.value:g}"


@dataclass(slots=True)
class Budget:
    path: str
    seams: list[SeamBudget] = field(default_factory=list)
    counters: list[CounterBound] = field(default_factory=list)
    max_dropped: Limit | None = None
    max_dropped_by_reason: dict[str, Limit] = field(default_factory=dict)
    total: dict[str, Limit] = field(default_factory=dict)

    def tolerance_for(self, src: str, dst: str, name: str) -> float | None:
        """The per-seam tolerance of the last entry that matches and sets one (file order)."""
        found = None
        for sb in self.seams:
            if sb.tolerance is not None and sb.selector.matches(src, dst, name):
                found = sb.tolerance
        return found


class _Reader:
    """Turns the loaded document into a `Budget`; every error names `path line N`."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, line: int, message: str) -> UsageError:
        return UsageError(f"{self.path} line {line}: {message}")

    def mapping(self, value: Any, line: int, what: str) -> Lines:
        if not isinstance(value, Lines):
            raise self.fail(line, f"{what} must be a mapping of keys to values")
        return value

    def known(self, m: Lines, allowed: tuple[str, ...], where: str) -> None:
        for key in m:
            if key not in allowed:
                raise self.fail(
                    m.lines[key], f"unknown key {key!r}{where}; expected one of {', '.join(allowed)}"
                )

    def size(self, value: Any, line: int) -> Limit:
        try:
            return Limit(float(parse_bytes(value)), str(value), line)
        except UsageError as exc:
            raise self.fail(line, str(exc)) from None

    def number(self, value: Any, line: int) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(line, f"{value!r} is not a number")
        return float(value)


def read(path: str) -> Budget:
    """Load and validate the budget file at `path`; raises UsageError with file and line."""
    try:
        text = read_text(path, "budget file")
    except FileNotFoundError:
        raise UsageError(f"budget file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the budget file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, path)


def parse(text: str, path: str = "<budget>") -> Budget:
    r = _Reader(path)
    check_yaml(text, path, "budget file")
    try:
        doc = load_yaml(text)
    except DuplicateKey as exc:
        raise r.fail(exc.line, f"duplicate key {exc.key!r}") from None
    except ValueError as exc:  # yaml's errors, with the line where parsing failed
        line, problem = exc.args
        raise r.fail(line, f"not valid YAML ({problem})") from None
    budget = Budget(path)
    if doc is None:
        return budget
    _finite(r, doc, 1)
    top = r.mapping(doc, 1, "the budget file")
    r.known(top, TOP_KEYS, "")
    if "version" in top and top["version"] != 1:
        raise r.fail(top.lines["version"], f"budget version {top['version']!r} is not supported (this flowmap reads 1)")
    if "seams" in top:
        budget.seams = _seams(r, r.mapping(top["seams"], top.lines["seams"], "'seams'"))
    if "counters" in top:
        budget.counters = _counters(r, top["counters"], top.lines["counters"])
    if "items" in top:
        _items(r, r.mapping(top["items"], top.lines["items"], "'items'"), budget)
    if "total" in top:
        total = r.mapping(top["total"], top.lines["total"], "'total'")
        r.known(total, TOTAL_KEYS, " under 'total'")
        budget.total = {k: r.size(v, total.lines[k]) for k, v in total.items()}
    return budget


def _seams(r: _Reader, seams: Lines) -> list[SeamBudget]:
    out = []
    for address, limits in seams.items():
        line = seams.lines[address]
        try:
            selector = parse_selector(str(address))
        except UsageError as exc:
            raise r.fail(line, str(exc)) from None
        m = r.mapping(limits, line, f"seam {address!r}")
        r.known(m, SEAM_KEYS, f" under seam {address!r}")
        parsed = {}
        tolerance = None
        for key, value in m.items():
            if key == "tolerance":
                tolerance = _fraction(r, value, m.lines[key], "tolerance")
            elif key == "max_hops_per_step":
                parsed[key] = Limit(r.number(value, m.lines[key]), str(value), m.lines[key])
            else:
                parsed[key] = r.size(value, m.lines[key])
        out.append(SeamBudget(selector, parsed, line, tolerance))
    return out


def _counters(r: _Reader, value: Any, line: int) -> list[CounterBound]:
    if isinstance(value, LineList):
        return [_expression(r, v, ln) for v, ln in zip(value, value.lines, strict=True)]
    m = r.mapping(value, line, "'counters'")
    out: list[CounterBound] = []
    for name, spec in m.items():
        ln = m.lines[name]
        if isinstance(spec, Lines):
            r.known(spec, STATS, f" under counter {name!r}")
            out += [_bound(r, str(name), stat, v, spec.lines[stat]) for stat, v in spec.items()]
        elif isinstance(spec, LineList):
            out += [_stat_bound(r, str(name), v, sl) for v, sl in zip(spec, spec.lines, strict=True)]
        else:
            out.append(_stat_bound(r, str(name), spec, ln))
    return out


def _bound(r: _Reader, name: str, stat: str, value: Any, line: int) -> CounterBound:
    """`max: 2` (bare: max/mean/last/count <= 2, min >= 2) or `max: "< 3"`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return CounterBound(name, stat, ">=" if stat == "min" else "<=", float(value), line)
    m = _BOUND.match(str(value))
    if not m:
        raise r.fail(line, f"cannot read the bound {value!r} of counter {name!r}; write e.g. 2 or '<= 2'")
    op = m.group(1) or (">=" if stat == "min" else "<=")
    return CounterBound(name, stat, op, float(m.group(2)), line)


def _stat_bound(r: _Reader, name: str, text: Any, line: int) -> CounterBound:
    """`"max <= 2"` under a counter's name."""
    m = _STAT_BOUND.match(str(text))
    if not m:
        raise r.fail(line, f"cannot read {text!r} for counter {name!r}; write e.g. 'max <= 2' or {{max: 2}}")
    return _checked_stat(r, name, m.group(1), m.group(2), m.group(3), line)


def _expression(r: _Reader, text: Any, line: int) -> CounterBound:
    """`staleness.max <= 2` as a list entry."""
    m = _EXPR.match(str(text))
    if not m:
        raise r.fail(line, f"cannot read the counter limit {text!r}; write it like 'staleness.max <= 2'")
    return _checked_stat(r, m.group(1).strip(), m.group(2), m.group(3), m.group(4), line)


def _checked_stat(r: _Reader, name: str, stat: str, op: str, value: str, line: int) -> CounterBound:
    if stat not in STATS:
        raise r.fail(line, f"unknown counter statistic {stat!r} for {name!r}; expected one of {', '.join(STATS)}")
    try:
        number = float(value)
    except ValueError:
        raise r.fail(line, f"{value!r} is not a number (counter {name!r})") from None
    return CounterBound(name, stat, op, number, line)


def _finite(r: _Reader, doc: Any, line: int) -> None:
    """Refuse numbers no limit can be: NaN (every comparison false: a check that never
    fails), infinities, and ints past any float (a 400-digit size)."""
    stack = [(doc, line)]
    seen: set[int] = set()  # aliases share nodes: walk each once
    while stack:
        v, ln = stack.pop()
        if isinstance(v, (Lines, LineList)):
            if id(v) in seen:
                continue
            seen.add(id(v))
        if isinstance(v, Lines):
            stack.extend((x, v.lines.get(k, ln)) for k, x in v.items())
        elif isinstance(v, LineList):
            stack.extend(zip(v, v.lines, strict=False))
        elif isinstance(v, float) and not math.isfinite(v) or (
            isinstance(v, int) and not isinstance(v, bool) and abs(v) > 1 << 63
        ):
            raise r.fail(ln, f"{str(v)[:24]} is not a finite number in range")


def _items(r: _Reader, m: Lines, budget: Budget) -> None:
    r.known(m, ITEM_KEYS, " under 'items'")
    if "max_dropped" in m:
        budget.max_dropped = _share(r, m["max_dropped"], m.lines["max_dropped"])
    if "max_dropped_by_reason" in m:
        reasons = r.mapping(m["max_dropped_by_reason"], m.lines["max_dropped_by_reason"], "'max_dropped_by_reason'")
        budget.max_dropped_by_reason = {
            str(k): _share(r, v, reasons.lines[k]) for k, v in reasons.items()
        }


def _fraction(r: _Reader, value: Any, line: int, what: str) -> float:
    try:
        return parse_fraction(value, what)
    except UsageError as exc:
        raise r.fail(line, str(exc)) from None


def _share(r: _Reader, value: Any, line: int) -> Limit:
    """'5 %' or 0.05 -> a share of all items; a whole number (3) -> a count."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return Limit(float(value), str(value), line)
    try:
        return Limit(parse_fraction(value, "max_dropped"), str(value), line, is_fraction=True)
    except UsageError as exc:
        raise r.fail(line, str(exc)) from None
