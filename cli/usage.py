"""A command's usage line as the user types it, where click's own reads wrong.

click writes a variadic argument as `[[RUN] [HTML_PATH]]...` and hides the
program arguments `trace` passes on; these commands say it plainly instead.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand


def usage_line(*pieces: str) -> type[TyperCommand]:
    """A command class whose usage line is `[OPTIONS]` and then `pieces`."""

    class _Usage(TyperCommand):
        def collect_usage_pieces(self, ctx: Any) -> list[str]:
            return ["[OPTIONS]", *pieces]

    return _Usage
