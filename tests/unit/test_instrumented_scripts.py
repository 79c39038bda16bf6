"""A script that imports flowmap itself is instrumented: `flowmap trace` does not watch it
for seams (the watch would end at its first call of the API, having watched its start-up).
"""

from __future__ import annotations

import pytest

from flowmap.cli.trace_run import imports_flowmap


@pytest.mark.parametrize(("source", "imports"), [
    ("import flowmap\n", True),
    ("import torch\nfrom flowmap.trainer.config import parse_args\n", True),
    ("def main():\n    import numpy, flowmap\n", True),
    ("import torch\n# import flowmap when tracing\n", False),
    ('NOTE = "import flowmap"\n', False),
    ("import flowmapper\n", False),
    ("import torch\n", False),
])
def test_a_script_that_imports_flowmap_is_instrumented(tmp_path, source, imports):
    script = tmp_path / "train.py"
    script.write_text(source)
    assert imports_flowmap(str(script)) is imports


def test_a_module_or_an_unreadable_script_is_watched(tmp_path):
    assert not imports_flowmap(None)
    assert not imports_flowmap(str(tmp_path / "missing.py"))
