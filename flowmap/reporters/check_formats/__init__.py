"""One module per output format, behind two functions each: `render_check`, `render_diff`.

Formats only lay out what `flowmap.check` computed (a `CheckReport`, a list of
`SeamDelta`); none of them measures or judges, so they always agree.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from flowmap.errors import UsageError

CHECK_FORMATS = ("text", "markdown", "json", "junit", "github")
DIFF_FORMATS = ("text", "markdown", "json")
_MODULES = {"text": "text", "markdown": "markdown", "json": "jsondoc", "junit": "junit", "github": "github"}


def _module(fmt: str, allowed: tuple[str, ...], verb: str) -> Any:
    if fmt not in allowed:
        raise UsageError(f"unknown --format {fmt!r} for {verb}; choose one of {', '.join(allowed)}")
    return importlib.import_module(f"flowmap.reporters.check_formats.{_MODULES[fmt]}")


def check_renderer(fmt: str) -> Callable[..., str]:
    render: Callable[..., str] = _module(fmt, CHECK_FORMATS, "check").render_check
    return render


def diff_renderer(fmt: str) -> Callable[..., str]:
    render: Callable[..., str] = _module(fmt, DIFF_FORMATS, "diff").render_diff
    return render
