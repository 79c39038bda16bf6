"""Check a run against absolute budgets: per seam, per counter, dropped items, the total.

A baseline says "no worse than last time"; a budget says "never more than
this", whatever the baseline drifted to. A glob or role in a seam address is
shorthand for the same limits on each seam it matches, each checked on its
own. (An entry's `tolerance` is not a limit: compare.py applies it to the
baseline check.) Per-step limits are checked against the run's heaviest step, so a budget
holds for every step, not just on average.
"""

from __future__ import annotations

import operator
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowmap.check.budget_file import Budget, CounterBound, Limit, SeamBudget
from flowmap.check.result import Result
from flowmap.check.tolerance import fmt_percent
from flowmap.units import fmt_bytes

if TYPE_CHECKING:
    from flowmap.model.aggregate import SeamKey, SeamStats
    from flowmap.model.run import Run

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq,
}
_DECIMAL = ("kB", "MB", "GB", "TB")


def fmt_like(n: float, limit_text: str) -> str:
    """Measured bytes in the unit family the limit was written in: '65.5 kB' next to '64 KB'."""
    if any(u.lower() in limit_text.lower() for u in _DECIMAL) and "i" not in limit_text.lower():
        for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if abs(n) >= size:
                return f"{n / size:.3g} {unit}"
        return f"{int(n)} B"
    return fmt_bytes(n)


class StepFigures:
    """Per-step bytes and hop counts per seam, and in all: what the "per step" limits read."""

    def __init__(self, run: Run) -> None:
        self.bytes: dict[Any, Counter[Any]] = defaultdict(Counter)
        self.hops: dict[Any, Counter[Any]] = defaultdict(Counter)
        self.total: Counter[Any] = Counter()
        for h in run.hops:
            self.bytes[h.seam][h.step] += h.nbytes
            self.hops[h.seam][h.step] += 1
            self.total[h.step] += h.nbytes

    def peak_bytes(self, key: SeamKey) -> int:
        return max(self.bytes[key].values(), default=0)

    def peak_hops(self, key: SeamKey) -> int:
        return max(self.hops[key].values(), default=0)


def evaluate(run: Run, budget: Budget) -> list[Result]:
    figures = StepFigures(run)
    out: list[Result] = []
    for sb in budget.seams:
        out += _seam_budget(run, sb, figures)
    out += [_counter(run, b) for b in budget.counters]
    if budget.max_dropped is not None:
        out.append(_dropped(run, None, budget.max_dropped))
    for reason, limit in sorted(budget.max_dropped_by_reason.items()):
        out.append(_dropped(run, reason, limit))
    for key, limit in sorted(budget.total.items()):
        out.append(_total(run, key, limit, figures))
    return out


def largest_leaves(s: SeamStats, n: int = 3) -> list[str]:
    """The leaves that make up most of a seam's hop, heaviest first, for failure messages."""
    from flowmap.check.diff import fmt_shape
    from flowmap.check.snapshot import seam_shot

    shot = seam_shot(s, 1)
    leaves = sorted(s.leaves, key=lambda ls: (-ls.max_bytes, ls.path))[:n]
    out = []
    for ls in leaves:
        leaf = shot.leaves[ls.path]
        schema = f"{leaf.dtype or leaf.kind} {fmt_shape(leaf)}" if leaf.shape else (leaf.dtype or leaf.kind)
        out.append(f"{shot.leaf_label(ls.path)} {schema}: {fmt_bytes(ls.max_bytes)}/hop at most")
    return out


def _seam_budget(run: Run, sb: SeamBudget, figures: StepFigures) -> list[Result]:
    matched = [s for s in run.seams.values() if sb.selector.matches(s.src, s.dst, s.name)]
    if not matched:
        return [Result(
            "budget", sb.selector.text, "warn",
            "matches no seam in this run; check the address, or remove the entry if the seam is gone",
            check=", ".join(sorted(sb.limits) or ["tolerance"]),
        )]
    return [_seam_limit(s, key, limit, figures) for s in matched for key, limit in sorted(sb.limits.items())]


def _seam_limit(s: SeamStats, key: str, limit: Limit, figures: StepFigures) -> Result:
    if key == "max_bytes_per_hop":
        measured, what, unit = s.max_bytes, "per hop", "B/hop"
    elif key == "max_bytes_per_step":
        measured, what, unit = figures.peak_bytes(s.key), "per step", "B/step"
    else:
        n = figures.peak_hops(s.key)
        ok = n <= limit.value
        summary = f"made {n} hops in a step, within {limit.text}" if ok else (
            f"was limited to {limit.text} hops per step but made {n}")
        return Result(
            "budget", s.label, "ok" if ok else "fail", summary,
            measured=n, limit=limit.value, unit="hops/step", check=key,
        )
    ok = measured <= limit.value
    summary = f"was limited to {limit.text} {what} but carried {fmt_like(measured, limit.text)}"
    if ok:
        summary = f"carried {fmt_like(measured, limit.text)} {what}, within {limit.text}"
    return Result(
        "budget", s.label, "ok" if ok else "fail", summary,
        [] if ok else largest_leaves(s),
        measured=measured, limit=limit.value, unit=unit, check=key,
    )


def _counter(run: Run, b: CounterBound) -> Result:
    subject = f"counter {b.counter}"
    stats = run.counters.get(b.counter)
    if stats is None:
        return Result("budget", subject, "warn", "was not recorded in this run", check=b.text)
    measured = float(getattr(stats, b.stat))
    ok = _OPS[b.op](measured, b.value)
    return Result(
        "budget", subject, "ok" if ok else "fail",
        f"{b.stat} = {measured:g} (limit: {b.text})",
        measured=measured, limit=b.value, check=b.text,
    )


def _dropped(run: Run, reason: str | None, limit: Limit) -> Result:
    items = run.items
    subject = "items dropped" if reason is None else f"items dropped ({reason})"
    check = "max_dropped" if reason is None else f"max_dropped_by_reason.{reason}"
    if items.total == 0:
        return Result("budget", subject, "warn", "no items were recorded in this run", check=check)
    n = items.dropped_total if reason is None else items.dropped.get(reason, 0)
    share = n / items.total
    measured = share if limit.is_fraction else n
    ok = measured <= limit.value
    return Result(
        "budget", subject, "ok" if ok else "fail",
        f"{n} of {items.total} items dropped ({fmt_percent(share)}; limit {limit.text})",
        measured=measured, limit=limit.value, check=check,
    )


def _total(run: Run, key: str, limit: Limit, figures: StepFigures) -> Result:
    if key == "max_bytes_per_step":
        measured, what = max(figures.total.values(), default=0), "in the heaviest step"
    else:
        measured, what = max((h.nbytes for h in run.hops), default=0), "in the largest hop"
    ok = measured <= limit.value
    return Result(
        "budget", "total", "ok" if ok else "fail",
        f"all seams carried {fmt_like(measured, limit.text)} {what} (limit {limit.text})",
        measured=measured, limit=limit.value, unit="B/step" if key.endswith("step") else "B/hop", check=key,
    )
