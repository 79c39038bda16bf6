"""What `check` found: one `Result` per seam (against the baseline) and per budget line.

Every output format renders a `CheckReport` and nothing else, so the text, the
PR-comment table, JUnit and the GitHub annotations always agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Ordered by how loudly each is shown: a failure first, then what changed, then the rest.
STATUSES = ("fail", "warn", "new", "improved", "gone", "ok")
FAILING = {"fail"}


@dataclass(slots=True)
class Result:
    """One checked subject: a seam against its baseline, or one budget limit."""

    group: str  # "baseline" or "budget": the JUnit suite, the table it appears in
    subject: str  # a seam label, `counter staleness`, `items dropped`, `total`
    status: str  # one of STATUSES
    summary: str  # one sentence: what was measured against what
    details: list[str] = field(default_factory=list)  # leaf-level explanations
    measured: float | None = None
    reference: float | None = None  # the baseline figure or the budget limit
    limit: float | None = None  # the figure above which this fails
    unit: str = ""  # "B/step", "B/hop", "" for plain numbers
    check: str = ""  # which limit: bytes_per_step, max_bytes_per_hop, max, ...

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    @property
    def title(self) -> str:
        """`seam label` or `seam label: max_bytes_per_hop`: unique per result, for JUnit and GitHub."""
        return f"{self.subject}: {self.check}" if self.group == "budget" and self.check else self.subject


@dataclass(slots=True)
class CheckReport:
    results: list[Result]
    run: str = ""
    baseline: str | None = None
    budget: str | None = None
    tolerance: float = 0.0
    min_bytes_per_step: int = 0
    accepting: bool = False  # `--update`: baseline regressions are accepted into the new baseline
    detail: str = ""  # the run's detail-window line (`Detail.note`), "" when every hop was kept
    ended: str = ""  # how the program ended, when it did not exit 0 (`Ending.sentence`)

    @property
    def failed(self) -> bool:
        """A failure that exits 1: with `--update`, only a broken budget (a baseline change is accepted)."""
        return any(r.failed and (not self.accepting or r.group == "budget") for r in self.results)

    @property
    def accepted(self) -> int:
        """Baseline regressions that `--update` writes into the new baseline."""
        return sum(1 for r in self.results if self.accepting and r.failed and r.group != "budget")

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    def ordered(self) -> list[Result]:
        """Failures first, then by status, then as produced (heaviest seams first)."""
        rank = {s: i for i, s in enumerate(STATUSES)}
        return sorted(self.results, key=lambda r: rank.get(r.status, len(rank)))

    def headline(self) -> str:
        """The one line a CI log must show: verdict and counts."""
        parts = []
        for status, word in (
            ("fail", "regression"), ("warn", "warning"), ("new", "new seam"),
            ("improved", "improvement"), ("gone", "gone seam"), ("ok", "within limits"),
        ):
            n = self.count(status)
            if status == "fail" and self.accepted:
                n -= self.accepted
                parts.append(f"{self.accepted} regression{'s' if self.accepted != 1 else ''} accepted")
            if n:
                plural = "s" if n != 1 and status != "ok" else ""
                parts.append(f"{n} {word}{plural}")
        verdict = "FAILED" if self.failed else "passed"
        if self.accepting:
            verdict += " (baseline updated)"
        return f"flowmap check {verdict}: " + (", ".join(parts) if parts else "nothing to check")
