"""Reporters: every output of a run, one module per format, each `report(view, options)`.

    terminal.py       `flowmap report`: what to fix first, then the heaviest seams
                      (columns.py fits its tables to the terminal's width)
    json_document.py  `flowmap report --json`: the stable, documented document
    dot.py            `render --dot`: Graphviz DOT text
    graphviz.py       `render --svg/--png`: the DOT drawn by Graphviz's `dot`
    html.py           `render --html`: one self-contained page (html_data.py, its
                      JSON; layout.py, layered.py and layout_records.py place the
                      graph; assets/, its script and style)
    perfetto.py       `export --perfetto`: Chrome Trace Event JSON (perfetto_folded.py
                      for folded runs)
    check_formats/    `check` and `diff` results as text, markdown, json, junit, github
    output.py         where an output goes: the path checked before anything is drawn

A reporter reads the `RunView` and its options and returns its output (text,
bytes, records or chunks); it never aggregates, never reads another reporter's
output, and never writes a file itself: `output.write_output` does, after the
path was checked. The check formats lay out a `CheckReport` or a diff instead
of a view, behind their own two functions (`check_formats`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from flowmap.errors import UsageError

if TYPE_CHECKING:
    from flowmap.model.view import RunView

OptionsT = TypeVar("OptionsT", contravariant=True)
OutputT = TypeVar("OutputT", covariant=True)


class Reporter(Protocol[OptionsT, OutputT]):
    """One output format: the view and this format's options in, the output out."""

    def __call__(self, view: RunView, options: OptionsT, /) -> OutputT: ...


#: Every format over a view, and the module whose `report` (a `Reporter`) draws it.
FORMATS = {
    "terminal": "flowmap.reporters.terminal",
    "json": "flowmap.reporters.json_document",
    "dot": "flowmap.reporters.dot",
    "image": "flowmap.reporters.graphviz",
    "html": "flowmap.reporters.html",
    "perfetto": "flowmap.reporters.perfetto",
}


def reporter(fmt: str) -> Reporter[Any, Any]:
    """The `report` function of format `fmt` (a key of `FORMATS`)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
    found: Reporter[Any, Any] = importlib.import_module(FORMATS[fmt]).report
    return found
