"""flowmap.check and its CLI verbs read the model only: importing them never imports torch."""

from __future__ import annotations

import subprocess
import sys

MODULES = [
    "flowmap.check", "flowmap.check.baseline", "flowmap.check.budget_file", "flowmap.check.budgets",
    "flowmap.check.compare", "flowmap.check.diff", "flowmap.check.gate", "flowmap.check.result",
    "flowmap.check.selectors", "flowmap.check.snapshot", "flowmap.check.tolerance", "flowmap.check.yaml_lines",
    "flowmap.check.pytest_plugin", "flowmap.reporters.check_formats.text", "flowmap.reporters.check_formats.markdown",
    "flowmap.reporters.check_formats.jsondoc", "flowmap.reporters.check_formats.junit", "flowmap.reporters.check_formats.github",
    "flowmap.cli.baseline", "flowmap.cli.check", "flowmap.cli.diff",
]


def test_check_never_imports_torch(tmp_path):
    run, base = str(tmp_path / "run"), str(tmp_path / "base.json")
    code = (
        "import importlib, sys\n"
        f"for m in {MODULES!r}: importlib.import_module(m)\n"
        "import flowmap\n"
        f"with flowmap.tracing({run!r}):\n"
        "    flowmap.hop('a', 'b', {'x': b'1234'}, name='c', step=0)\n"
        "from flowmap.cli.main import main\n"
        f"assert main(['baseline', {run!r}, '-o', {base!r}]) == 0\n"
        f"assert main(['check', {run!r}, '--baseline', {base!r}, '--format', 'junit']) == 0\n"
        f"assert main(['diff', {run!r}, {base!r}]) == 0\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
