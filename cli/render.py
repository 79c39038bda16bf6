"""`flowmap render [RUN] --dot PATH | --svg PATH | --png PATH | --html [PATH]`.

`--html` takes an optional path, which typer's options cannot express; the
HTML path is therefore a second positional word ending in `.html`:
`flowmap render RUN --html out.html` (or `flowmap render --html out.html` for
the newest run). Without one, the HTML lands in the run directory. Several
outputs may be asked for at once; each written path is printed.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from flowmap.errors import UsageError

if TYPE_CHECKING:
    from flowmap.model.view import RunView

HTML_SUFFIXES = (".html", ".htm")


def render(
    words: Annotated[list[str] | None, typer.Argument(metavar="[RUN] [HTML_PATH]", help="Run directory or shard (default: the newest run here), and with --html an output path ending in .html.")] = None,
    dot: Annotated[str | None, typer.Option("--dot", metavar="PATH", help="Write Graphviz DOT text.")] = None,
    svg: Annotated[str | None, typer.Option("--svg", metavar="PATH", help="Write SVG (needs Graphviz's dot).")] = None,
    png: Annotated[str | None, typer.Option("--png", metavar="PATH", help="Write PNG (needs Graphviz's dot).")] = None,
    html: Annotated[bool, typer.Option("--html", help="Write the self-contained HTML view (path: a word ending in .html, default RUN/flowmap.html).")] = False,
    instances: Annotated[bool, typer.Option("--instances", help="One node per owner (rollout/0, rollout/1) instead of per role (rollout ×2); DOT/SVG/PNG.")] = False,
    project: Annotated[str | None, typer.Option("--project", metavar="PRESET[@CONTEXT]", help="Scale leaves with named dims to a model preset, e.g. deepseek-v3.2@32k.")] = None,
) -> None:
    """Draw the run's dataflow graph: edges sized and coloured by bytes per step."""
    run_arg, html_path = _split_words(words or [], html)
    if not (dot or svg or png or html):
        raise UsageError("say what to write: --dot PATH, --svg PATH, --png PATH or --html [PATH]")
    from flowmap.model.open_view import open_view

    view = open_view(run_arg, project)
    if dot or svg or png:
        _write_graph(view, dot, svg, png, instances)
    if html:
        typer.echo(_write_html(view, html_path))


def _split_words(words: list[str], html: bool) -> tuple[str | None, str | None]:
    """(RUN, HTML path) from the positional words."""
    pages = [w for w in words if w.lower().endswith(HTML_SUFFIXES) and not os.path.isdir(w)]
    runs = [w for w in words if w not in pages]
    if pages and not html:
        raise UsageError(f"{pages[0]} looks like an HTML path; add --html to write it")
    if len(pages) > 1 or len(runs) > 1:
        raise UsageError("give at most one RUN and, with --html, one path ending in .html")
    return (runs[0] if runs else None, pages[0] if pages else None)


def _write_graph(view: RunView, dot: str | None, svg: str | None, png: str | None,
                 instances: bool) -> None:
    from flowmap.reporters import reporter
    from flowmap.reporters.dot import DotOptions
    from flowmap.reporters.graphviz import ImageOptions
    from flowmap.reporters.output import check_output, write_output

    for path in (dot, svg, png):  # every path checked before the first is written
        if path:
            check_output(path)
    if dot:
        typer.echo(write_output(dot, reporter("dot")(view, DotOptions(instances=instances))))
    for fmt, path in (("svg", svg), ("png", png)):
        if path:  # written only once `dot` succeeded
            typer.echo(write_output(path, reporter("image")(view, ImageOptions(fmt, instances))))


def _write_html(view: RunView, path: str | None) -> str:
    from flowmap.reporters import reporter
    from flowmap.reporters.html import HtmlOptions, default_html_path
    from flowmap.reporters.output import check_output, write_output

    out = check_output(path if path is not None else default_html_path(view))
    return write_output(out, reporter("html")(view, HtmlOptions()))


def register(app: typer.Typer) -> None:
    from flowmap.cli.usage import usage_line

    app.command("render", cls=usage_line("[RUN]", "[HTML_PATH]"))(render)
