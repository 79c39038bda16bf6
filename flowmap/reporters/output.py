"""Where an output goes: the path is checked before anything is drawn or written.

A typo in `--html /nonexist/dir/o.html` must not create folders, and a path
under a file must not fail with the OS's "File exists": each mistake gets one
sentence naming the path and exit 2, like any other usage error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from flowmap.errors import FlowmapError, UsageError


def check_output(path: str | os.PathLike[str]) -> str:
    """`path` as a string, once its folder exists and it is not itself a folder."""
    out = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise UsageError(f"cannot write {out}: it is a folder; give a file path")
    if not os.path.exists(parent):
        raise UsageError(f"cannot write {out}: the folder {parent} does not exist; create it first")
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {out}: {parent} is a file, not a folder")
    return out


def write_output(path: str | os.PathLike[str], data: str | bytes | Iterable[str]) -> str:
    """Write `data` (text as UTF-8 with `\\n` line ends, or text in chunks) to a checked `path`.

    Returns the path written.
    """
    out = check_output(path)
    try:
        if isinstance(data, bytes):
            with open(out, "wb") as f:
                f.write(data)
        else:
            with open(out, "w", encoding="utf-8", newline="\n") as f:
                f.writelines([data] if isinstance(data, str) else data)
    except OSError as exc:
        raise FlowmapError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out
