"""`flowmap render --html`: one self-contained HTML file that shows a run.

The file must open offline, in any browser, years later, and must never run
code that came from the traced program. So:

- the script and style are ours, inlined from `assets/`; there is no CDN,
  no font, no request of any kind, and a Content-Security-Policy forbids them
  (`default-src 'none'`; only our script, by its hash, may run — an injected
  `onerror=` attribute would not);
- the run's data (every name in it written by user code) goes in as JSON in
  `<script type="application/json">`, with `<`, `>`, `&`, U+2028 and U+2029
  escaped so no string can close the tag; the script reads it with
  `JSON.parse` and writes it with `textContent`, never as markup;
- the output is deterministic: same run, byte-identical file.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from flowmap.model.view import RunView
from flowmap.reporters.html_data import html_document
from flowmap.reporters.output import check_output, write_output

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
DEFAULT_HTML_NAME = "flowmap.html"


@dataclass(frozen=True, slots=True)
class HtmlOptions:
    """`layout`: "auto" (Graphviz `dot` when installed, else the built-in layered
    layout), "dot" or "layered"; `title` replaces the page's title."""

    layout: str = "auto"
    title: str | None = None


def report(view: RunView, options: HtmlOptions) -> str:
    return render_html(view, layout=options.layout, title=options.title)


def write_html(
    view: RunView, path: str | os.PathLike[str] | None = None, *, layout: str = "auto",
    title: str | None = None,
) -> str:
    """Write the HTML view of `run` to `path`; returns the path written.

    `path` defaults to `flowmap.html` inside the run directory (next to a
    single-shard run). `layout` is "auto" (Graphviz `dot` when installed,
    else the built-in layered layout), "dot" or "layered".
    """
    out = check_output(path if path is not None else default_html_path(view))
    return write_output(out, report(view, HtmlOptions(layout, title)))


def default_html_path(view: RunView) -> str:
    if os.path.isdir(view.path):
        return os.path.join(view.path, DEFAULT_HTML_NAME)
    return os.path.splitext(view.path)[0] + ".html"


def render_html(view: RunView, *, layout: str = "auto", title: str | None = None) -> str:
    """The page as one string (see the module docstring for what it promises)."""
    return page(html_document(view, layout), title or f"flowmap · {view.path}")


def page(document: dict[str, Any], title: str, *, live: bool = False) -> str:
    """The page around `document`. `live`: the page `flowmap serve` sends, which also
    fetches newer data from the server that sent it (`connect-src 'self'`), nothing else."""
    script = _script(live)
    style = _asset("flowmap.css")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        + ("connect-src 'self'; " if live else "")
        + "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
    )
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        '<meta name="generator" content="flowmap">\n',
        f"<title>{html.escape(title)}</title>\n",
        '<link rel="icon" href="data:,">\n',
        f"<style>\n{style}</style>\n</head>\n<body>\n",
        "<noscript>This flowmap view needs JavaScript.</noscript>\n",
        f'<script type="application/json" id="flowmap-data">{embed_json(document)}</script>\n',
        f"<script>{script}</script>\n</body>\n</html>\n",
    ])


def embed_json(document: Any) -> str:
    """JSON that is safe between `<script>` tags: no string in it can end the element."""
    try:
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except ValueError:  # a NaN or infinity somewhere: null, as strict JSON wants
        from flowmap.strict_json import finite

        text = json.dumps(finite(document), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


_INCLUDE = re.compile(r"^ *\/\* @include ([a-z_]+\.js) \*\/$", re.MULTILINE)


def _script(live: bool = False) -> str:
    """flowmap.js with its parts (`/* @include graph.js */`) put in place: one closure, one hash.

    `live.js` goes only into the live page: a file opened from disk fetches nothing."""
    return _INCLUDE.sub(
        lambda m: "" if m.group(1) == "live.js" and not live else _asset(m.group(1)).rstrip("\n"),
        _asset("flowmap.js"))


def _asset(name: str) -> str:
    text = resources.files("flowmap.reporters").joinpath("assets", name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():  # would end the inline element early
        raise RuntimeError(f"asset {name} must not contain a closing script or style tag")
    return text
