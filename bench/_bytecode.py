"""Compile the tree's bytecode before a benchmark times start-up, as a regular install does.

`pip install` writes every module's .pyc; an editable install (`pip install -e .`,
what scripts/setup.sh makes) writes none, and where PYTHONDONTWRITEBYTECODE is set
Python never caches them either: each process would compile the modules it imports
from source, ~0.3 ms a module, which a user's install never pays. The trainer and
flowmap's capture modules are both compiled, so traced and plain runs start alike.
"""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("flowmap", "trainer", "cli", "examples")


def compile_tree(root: Path = ROOT) -> None:
    for tree in TREES:
        compileall.compile_dir(root / tree, quiet=2, workers=0)
