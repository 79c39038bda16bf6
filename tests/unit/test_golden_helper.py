"""The golden-file helper cannot pass without comparing."""

from __future__ import annotations

import pytest
from golden import Golden


def test_a_match_passes_and_a_difference_fails_with_a_diff(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("a\nb\n")
    Golden(update=False).check(str(path), "a\nb\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)differs from g.txt.*-b.*\+c"):
        Golden(update=False).check(str(path), "a\nc\n")


def test_a_missing_golden_file_fails(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="missing"):
        Golden(update=False).check(str(tmp_path / "none.txt"), "x")


def test_update_mode_writes_and_reports_a_skip_never_a_pass(tmp_path):
    path = tmp_path / "g.txt"
    with pytest.raises(pytest.skip.Exception, match="rewrote g.txt"):
        Golden(update=True).check(str(path), "new\n")
    assert path.read_text() == "new\n"
