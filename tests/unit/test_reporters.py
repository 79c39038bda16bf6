"""The reporters wing: every format is a `report(view, options)`, and nothing that ships goes missing quietly."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
import subprocess
import sys

import pytest
import typer
from runs import write_rl_run

import flowmap
from flowmap.cli.main import VERBS, app
from flowmap.errors import UsageError
from flowmap.reporters import FORMATS, reporter
from flowmap.reporters.dot import DotOptions, dot_source
from flowmap.reporters.graphviz import ImageOptions
from flowmap.reporters.html import HtmlOptions, render_html
from flowmap.reporters.json_document import JsonOptions, report_document
from flowmap.reporters.perfetto import PerfettoOptions, perfetto_trace
from flowmap.reporters.terminal import TerminalOptions, report_lines

CLI_DIR = os.path.dirname(importlib.import_module("flowmap.cli").__file__ or "")


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("rl") / "run"))).view


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_is_a_module_with_report_and_options(fmt):
    """GIVEN a format in the registry THEN its module imports and has `report` and an options record."""
    module = importlib.import_module(FORMATS[fmt])
    assert callable(module.report)
    options = [v for k, v in vars(module).items() if k.endswith("Options") and dataclasses.is_dataclass(v)]
    assert len(options) == 1, f"{FORMATS[fmt]} should define one *Options dataclass"


def test_each_report_is_what_its_format_writes(view):
    """The interface adds nothing of its own: each `report` returns its format's output."""
    assert reporter("terminal")(view, TerminalOptions(90)) == report_lines(view, 90)
    assert json.loads(reporter("json")(view, JsonOptions())) == json.loads(
        json.dumps(report_document(view)))
    assert reporter("dot")(view, DotOptions(instances=True)) == dot_source(view, instances=True)
    assert reporter("html")(view, HtmlOptions(layout="layered")) == render_html(view, layout="layered")
    chunks = "".join(reporter("perfetto")(view, PerfettoOptions()))
    assert json.loads(chunks) == json.loads(json.dumps(perfetto_trace(view)))


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_the_image_reporter_draws_the_dot(view):
    svg = reporter("image")(view, ImageOptions("svg"))
    assert isinstance(svg, bytes) and b"<svg" in svg


def test_an_unknown_format_is_a_usage_error():
    with pytest.raises(UsageError, match="choose one of"):
        reporter("pdf")


def test_every_verb_module_is_registered_and_every_verb_is_a_command():
    """A verb module that exists but is not listed, or listed but not a command, fails here.

    (A listed verb whose module is missing or broken fails earlier: `flowmap.cli.main`
    does not import.)
    """
    modules = sorted(
        name[:-3] for name in os.listdir(CLI_DIR)
        if name.endswith(".py") and "def register(" in open(os.path.join(CLI_DIR, name)).read()
    )
    assert sorted(VERBS) == modules
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert sorted(commands) == sorted(VERBS)


def test_no_reporter_imports_torch():
    """Outputs read the model only: importing every reporter leaves torch unloaded."""
    modules = sorted(FORMATS.values()) + ["flowmap.reporters.check_formats",
                                          "flowmap.model.open_view", "flowmap.cli.errors"]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
