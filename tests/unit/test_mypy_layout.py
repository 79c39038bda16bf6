"""mypy checks the trainer and the CLI under their installed names, through ci/mypy/ links.

setup.py maps folders to packages (`trainer/` -> `flowmap.trainer`); mypy
cannot follow the editable install's import hook, so ci/mypy/flowmap/ links
each mapped folder under its installed name. A root added to setup.py without
its link would leave that tree unchecked (its imports silently Any).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).parents[2]


def _roots() -> dict[str, str]:
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ROOTS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no ROOTS")


def test_every_mapped_root_is_linked_under_its_installed_name_and_checked() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    base = REPO / config["mypy_path"]
    mapped = {name: folder for name, folder in _roots().items() if name != "flowmap"}
    assert mapped == {"flowmap.cli": "cli", "flowmap.trainer": "trainer"}
    for name, folder in mapped.items():
        link = base.joinpath(*name.split("."))
        assert link.is_symlink() and link.resolve() == (REPO / folder).resolve(), name
        assert name in config["packages"]
    assert "flowmap" in config["packages"] and config["strict"] is True
