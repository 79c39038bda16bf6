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
from collections.abc import Callable
from typing import TYPE_CHECKING

from flowmap.check.budget_file import Budget, CounterBound, Limit, SeamBudget
from flowmap.check.result import Result
from flowmap.check.tolerance import fmt_percent
from flowmap.model.format import fmt_bytes, fmt_named_schema, leaf_label
from flowmap.units import plural

if TYPE_CHECKING:
    from flowmap.model.types import SeamStats
    from flowmap.model.view import RunView

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq,
}
_DECIMAL = ("kb", "mb", "gb", "tb")


def fmt_like(n: float, limit_text: str) -> str:
    """Measured bytes in KiB/MiB, the one unit family every output uses."""
    return fmt_bytes(n)


def limit_label(limit_text: str, value: float) -> str:
    """`64 KB (62.50 KiB)`: a limit as written, with its binary figure when written in decimal units."""
    low = limit_text.lower()
    if any(u in low for u in _DECIMAL) and "i" not in low:
        return f"{limit_text} ({fmt_bytes(value)})"
    return limit_text


def evaluate(run: RunView, budget: Budget) -> list[Result]:
    """Every limit of `budget` against the run's figures (per-step limits: its heaviest step)."""
    out: list[Result] = []
    for sb in budget.seams:
        out += _seam_budget(run, sb)
    out += [_counter(run, b) for b in budget.counters]
    if budget.max_dropped is not None:
        out.append(_dropped(run, None, budget.max_dropped))
    for reason, limit in sorted(budget.max_dropped_by_reason.items()):
        out.append(_dropped(run, reason, limit))
    for key, limit in sorted(budget.total.items()):
        out.append(_total(run, key, limit))
    return out


def largest_leaves(s: SeamStats, n: int = 3) -> list[str]:
    """The leaves that make up most of a seam's hop, heaviest first, for failure messages."""
    leaves = sorted(s.leaves, key=lambda ls: (-ls.max_bytes, ls.path))[:n]
    return [f"{leaf_label(s.name, ls.path)} {fmt_named_schema(ls.dtype or ls.kind, ls.shape, ls.dims)}: "
            f"{fmt_bytes(ls.max_bytes)}/hop at most" for ls in leaves]


def _seam_budget(run: RunView, sb: SeamBudget) -> list[Result]:
    matched = [s for s in run.seams.values() if sb.selector.matches(s.src, s.dst, s.name)]
    if not matched:
        return [Result(
            "budget", sb.selector.text, "warn",
            "matches no seam in this run; check the address, or remove the entry if the seam is gone",
            check=", ".join(sorted(sb.limits) or ["tolerance"]),
        )]
    return [_seam_limit(s, key, limit) for s in matched for key, limit in sorted(sb.limits.items())]


def _seam_limit(s: SeamStats, key: str, limit: Limit) -> Result:
    if key == "max_bytes_per_hop":
        measured, what, unit = s.max_bytes, "per hop", "B/hop"
    elif key == "max_bytes_per_step":
        measured, what, unit = s.bytes_per_step_max, "per step", "B/step"
    else:
        n = s.hops_per_step_max
        ok = n <= limit.value
        summary = f"made {plural(n, 'hop')} in a step, within {limit.text}" if ok else (
            f"was limited to {limit.text} hops per step but made {n}")
        return Result(
            "budget", s.label, "ok" if ok else "fail", summary,
            measured=n, limit=limit.value, unit="hops/step", check=key,
        )
    ok = measured <= limit.value
    shown = limit_label(limit.text, limit.value)
    summary = f"was limited to {shown} {what} but carried {fmt_bytes(measured)}"
    if ok:
        summary = f"carried {fmt_bytes(measured)} {what}, within {shown}"
    return Result(
        "budget", s.label, "ok" if ok else "fail", summary,
        [] if ok else largest_leaves(s),
        measured=measured, limit=limit.value, unit=unit, check=key,
    )


def _counter(run: RunView, b: CounterBound) -> Result:
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


def _dropped(run: RunView, reason: str | None, limit: Limit) -> Result:
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


def _total(run: RunView, key: str, limit: Limit) -> Result:
    if key == "max_bytes_per_step":
        measured, what = run.totals.bytes_per_step_max, "in the heaviest step"
    else:
        measured, what = run.totals.max_hop_bytes, "in the largest hop"
    ok = measured <= limit.value
    return Result(
        "budget", "total", "ok" if ok else "fail",
        f"all seams carried {fmt_like(measured, limit.text)} {what} (limit {limit.text})",
        measured=measured, limit=limit.value, unit="B/step" if key.endswith("step") else "B/hop", check=key,
    )
