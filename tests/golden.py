"""Golden files: one helper for every test that compares an output with a file in the repo.

`pytest --update-golden` (or FLOWMAP_UPDATE_GOLDEN=1) rewrites the files and
reports each such test as *skipped*, never as passed: a run that rewrote a
golden file proves nothing, and must be followed by a normal run (which
always compares) and a read of the diff. A missing golden file fails.
"""

from __future__ import annotations

import difflib
import os

import pytest

UPDATE_ENV = "FLOWMAP_UPDATE_GOLDEN"
UPDATE_OPTION = "--update-golden"
MAX_DIFF_LINES = 80


class Golden:
    """`golden.check(path, text)`: compare `text` with the file at `path` (or rewrite it)."""

    def __init__(self, update: bool) -> None:
        self.update = update

    def check(self, path: str, text: str) -> None:
        if self.update:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            pytest.skip(f"rewrote {os.path.basename(path)}; run again without "
                        f"{UPDATE_OPTION} to compare, and read the diff")
        if not os.path.exists(path):
            pytest.fail(f"golden file {path} is missing; write it with pytest {UPDATE_OPTION}")
        with open(path, encoding="utf-8", newline="") as f:
            expected = f.read()
        if text != expected:
            diff = list(difflib.unified_diff(expected.splitlines(), text.splitlines(),
                                             "golden", "now", lineterm=""))
            shown = "\n".join(diff[:MAX_DIFF_LINES])
            pytest.fail(f"output differs from {os.path.basename(path)} "
                        f"({len(diff)} diff lines; {UPDATE_OPTION} rewrites it):\n{shown}")


def wants_update(config: pytest.Config) -> bool:
    return bool(config.getoption("update_golden") or os.environ.get(UPDATE_ENV))
