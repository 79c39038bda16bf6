"""The one place a flowmap error becomes what the user sees: one line on stderr and its exit code.

Library code raises `FlowmapError` subclasses carrying an exit code (2 for a
usage mistake, 1 otherwise). Every way into the CLI, the typer app (the
console script, `python -m flowmap`, typer's `CliRunner` in the tests) and
the plain `flowmap trace` fast path (`entry.py`), goes through
`one_line_errors`, so each prints the same sentence and exits with the same
code, never a traceback. Kept free of typer: the fast path must not load it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from flowmap.errors import FlowmapError


@contextmanager
def one_line_errors() -> Iterator[None]:
    """A `FlowmapError` inside ends as `flowmap: <sentence>` on stderr and `SystemExit(code)`."""
    try:
        yield
    except FlowmapError as exc:
        sys.stderr.write(f"flowmap: {exc}\n")
        raise SystemExit(exc.exit_code) from None
