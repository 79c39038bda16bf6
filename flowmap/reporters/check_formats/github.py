"""GitHub Actions workflow commands: `::error title=...::...` per regression.

Annotations appear on the run's summary page and, with `file=`, next to the
budget line that failed. The markdown report goes to `$GITHUB_STEP_SUMMARY`
(see `append_step_summary`), which the CLI does when the variable is set.
"""

from __future__ import annotations

import os

from flowmap.check.result import CheckReport, Result

_LEVEL = {"fail": "error", "warn": "warning", "new": "notice", "improved": "notice", "gone": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_check(report: CheckReport) -> str:
    lines = [_annotation(report, r) for r in report.ordered() if r.status in _LEVEL]
    lines.append(report.headline())
    return "\n".join(lines) + "\n"


def _annotation(report: CheckReport, r: Result) -> str:
    props = []
    source = report.baseline if r.group == "baseline" else report.budget
    if source:
        props.append(f"file={escape_property(source)}")
    props.append(f"title={escape_property('flowmap: ' + r.title)}")
    message = "\n".join([r.summary, *r.details])
    return f"::{_LEVEL[r.status]} {','.join(props)}::{escape_data(message)}"


def append_step_summary(markdown: str, env: dict[str, str] | None = None) -> bool:
    """Append `markdown` to `$GITHUB_STEP_SUMMARY` when set; True if written."""
    path = (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(markdown + "\n")
    except OSError:
        return False  # the summary is a courtesy; the annotations already carry the verdict
    return True
