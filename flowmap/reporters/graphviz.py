"""Run Graphviz's `dot` binary: DOT text in, SVG or PNG out.

flowmap does not depend on Graphviz: the DOT and HTML outputs work without it.
When an image is asked for and `dot` is missing, the error is one line that
says how to install it, never a traceback.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowmap.errors import FlowmapError, UsageError

if TYPE_CHECKING:
    from flowmap.model.view import RunView

FORMATS = ("svg", "png")
TIMEOUT_S = 120
INSTALL_HINT = (
    "Graphviz's `dot` is not installed (needed for --svg/--png); install it with "
    "`apt-get install graphviz` or `brew install graphviz`, or use --dot / --html instead"
)


class GraphvizMissing(FlowmapError):
    """`dot` is not on PATH."""


@dataclass(frozen=True, slots=True)
class ImageOptions:
    """`fmt` is svg or png; `instances`: one node per owner rather than per role."""

    fmt: str = "svg"
    instances: bool = False


def report(view: RunView, options: ImageOptions) -> bytes:
    """The run's DOT (`flowmap.reporters.dot`) drawn by Graphviz as `options.fmt`."""
    from flowmap.reporters.dot import dot_source

    return run_dot(dot_source(view, instances=options.instances), options.fmt)


def find_dot() -> str | None:
    """The path of `dot` on PATH, or None."""
    return shutil.which("dot")


def run_dot(source: str, fmt: str) -> bytes:
    """Lay out and draw `source` as `fmt` (svg or png); raises GraphvizMissing without `dot`."""
    if fmt not in FORMATS:
        raise UsageError(f"cannot draw {fmt!r}; choose one of {', '.join(FORMATS)}")
    dot = find_dot()
    if dot is None:
        raise GraphvizMissing(INSTALL_HINT)
    try:
        done = subprocess.run([dot, f"-T{fmt}"], input=source.encode("utf-8"),
                              capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise FlowmapError(f"Graphviz `dot` took over {TIMEOUT_S} s; try --dot or --html") from None
    except OSError as exc:
        raise GraphvizMissing(f"{INSTALL_HINT} ({exc.strerror or exc})") from None
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise FlowmapError(f"Graphviz `dot` failed: {why[0] if why else f'exit {done.returncode}'}")
    return done.stdout
