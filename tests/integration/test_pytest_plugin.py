"""The pytest plugin, as a user's test suite meets it.

pytester runs a nested pytest session in this process; a session costs about
a second to start, so every scenario lives in one inner test file and each
test's failure text is read from its own section of the report.
"""

from __future__ import annotations

import re
import tempfile

import numpy  # noqa: F401 - imported once here: pytester's in-process runs cannot re-import it

pytest_plugins = ["pytester"]

SUITE = '''
import numpy as np
import pytest

import flowmap


def rollout(n):
    for engine in (0, 1):
        flowmap.hop(f"rollout/{engine}", "ready_buffer",
                    {"logprobs": np.zeros(n, np.float32), "ids": np.zeros(n, np.int64)},
                    name="trajectory")


@pytest.mark.flowmap_budget("rollout -> ready_buffer", max_bytes_per_hop="64 KB")
def test_small():
    rollout(1024)  # 12 KiB per hop


@pytest.mark.flowmap_budget("rollout/* -> ready_buffer : trajectory", max_bytes_per_hop="64 KB")
def test_big():
    rollout(8192)  # 96 KiB per hop


@pytest.mark.flowmap_budget("rollout/0 -> ready_buffer", max_bytes_per_hop="1 MiB")
@pytest.mark.flowmap_budget("rollout/1 -> ready_buffer", max_bytes_per_step="16 KiB")
def test_two_limits():
    for step in range(2):
        flowmap.step(step)
        rollout(1024)
        rollout(1024)  # two hops per engine per step: 24 KiB per step


@pytest.mark.flowmap_budget("rollout -> ready_bufer", max_bytes_per_hop="64 KB")
def test_typo():
    rollout(16)


@pytest.mark.flowmap_budget("rollout -> ready_buffer", max_bytes_per_hop="1 KB")
def test_raises():
    rollout(8192)
    assert 1 == 2, "the test's own failure"


def test_plain():
    assert not flowmap.is_tracing()


@pytest.mark.flowmap_budget("rollout -> ready_buffer", max_bytes_per_hop="64 XB")
def test_bad_size():
    rollout(16)


@pytest.mark.flowmap_budget("rollout -> ready_buffer", max_bytes="64 KB")
def test_bad_key():
    rollout(16)


@pytest.mark.flowmap_budget("rollout -> ready_buffer")
def test_no_limit():
    rollout(16)


@pytest.mark.flowmap_budget("rollout", max_bytes_per_hop="64 KB")
def test_bad_address():
    rollout(16)
'''


def _sections(output: str) -> dict[str, str]:
    parts = re.split(r"^_{3,} (test_\w+) _{3,}$", output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_plugin_is_registered_by_entry_point(pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.flowmap_budget(seam, max_bytes_per_hop=None*"])


def test_marker_scenarios(pytester, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(pytester.path))  # failed runs are kept: keep them here
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=8)
    out = result.stdout.str()
    failed = _sections(out)
    assert set(failed) == {
        "test_big", "test_two_limits", "test_typo", "test_raises",
        "test_bad_size", "test_bad_key", "test_no_limit", "test_bad_address",
    }
    assert "Traceback" not in out

    # GIVEN a glob over two engines WHEN both exceed THEN both named, with limit, size, leaves
    assert failed["test_big"].strip().splitlines()[:8] == [
        "Seam rollout/0 -> ready_buffer : trajectory was limited to 64 KB (62.50 KiB) per hop but carried 96.00 KiB",
        "  largest leaves:",
        "    trajectory.ids int64 [8192]: 64.00 KiB/hop at most",
        "    trajectory.logprobs float32 [8192]: 32.00 KiB/hop at most",
        "Seam rollout/1 -> ready_buffer : trajectory was limited to 64 KB (62.50 KiB) per hop but carried 96.00 KiB",
        "  largest leaves:",
        "    trajectory.ids int64 [8192]: 64.00 KiB/hop at most",
        "    trajectory.logprobs float32 [8192]: 32.00 KiB/hop at most",
    ]
    kept = re.search(r"\(the run is kept at (\S+): flowmap report \1\)", failed["test_big"])
    assert kept and kept.group(1).startswith(str(pytester.path))

    # stacked markers: only the broken one reports; per-step limits read the heaviest step
    assert ("Seam rollout/1 -> ready_buffer : trajectory was limited to 16 KiB per step "
            "but carried 24.00 KiB") in failed["test_two_limits"]
    assert "rollout/0 -> ready_buffer : trajectory was limited" not in failed["test_two_limits"]

    # a typo in the address fails rather than passing silently
    assert ("No hop in this test crossed a seam matching 'rollout -> ready_bufer' (seams seen: "
            "rollout/0 -> ready_buffer : trajectory, rollout/1 -> ready_buffer : trajectory)") in failed["test_typo"]

    # the test's own failure wins; budgets are not checked on a failed body
    assert "the test's own failure" in failed["test_raises"]
    assert "was limited to" not in failed["test_raises"]

    # marker mistakes: one line, before the body runs
    assert "cannot read '64 XB' as a size" in failed["test_bad_size"]
    assert "unknown limit 'max_bytes'" in failed["test_bad_key"]
    assert "give at least one limit" in failed["test_no_limit"]
    assert "cannot read the seam 'rollout'" in failed["test_bad_address"]


def test_a_marker_mistake_is_printed_once(pytester):
    # a fresh interpreter, as a user runs pytest: there the error used to print chained, twice
    pytester.makepyfile(test_m="""
        import flowmap, pytest

        @pytest.mark.flowmap_budget("a -> b", max_bytes=3)
        def test_bad_key():
            flowmap.hop("a", "b", b"xx", name="x")
    """)
    # -rN: no short summary, which repeats the message by design (in full under CI=true)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rN")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "During handling" not in out
    assert out.count("unknown limit 'max_bytes'") == 1
