"""Tolerances and percentages: what users may write, and the one-line refusal otherwise."""

from __future__ import annotations

import pytest

from flowmap.check.tolerance import fmt_change, fmt_percent, parse_fraction
from flowmap.errors import UsageError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("10%", 0.10), ("10 %", 0.10), (" 2.5% ", 0.025), ("0%", 0.0), ("0.1", 0.1), (0.25, 0.25), ("150%", 1.5)],
)
def test_parse_fraction_accepts(text, expected):
    assert parse_fraction(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["abc", "10 percent", "-5%", "%", "", "10%%", True])
def test_parse_fraction_refuses_with_one_line(text):
    with pytest.raises(UsageError) as exc:
        parse_fraction(text)
    assert "\n" not in str(exc.value)
    assert "--tolerance" in str(exc.value)


def test_bare_number_of_one_or_more_is_ambiguous():
    with pytest.raises(UsageError, match="ambiguous.*'10%'"):
        parse_fraction("10")


def test_formatting():
    assert fmt_percent(0.1) == "10 %"
    assert fmt_percent(0.025) == "2.5 %"
    assert fmt_change(100, 200) == "+100 %"
    assert fmt_change(300, 200) == "-33 %"
    assert fmt_change(1000, 1025) == "+2.5 %"
    assert fmt_change(0, 5) == "new"
