"""Find the shards of a run directory (`flowmap.read.incremental` reads them).

Kept apart from `reader` (one shard's bytes to records): what counts as a
shard file of a run (regular files only, no symlink out of the run, no loop).
"""

from __future__ import annotations

import os
import stat

from flowmap import trace_format as tf
from flowmap.errors import NotATrace
from flowmap.read.plain import show_path
from flowmap.rundir import shard_names


def scan_run(run_path: str) -> tuple[list[str], list[str]]:
    """(shard files, problems): the readable shard files of a run directory, sorted, and a
    sentence for each entry skipped (not a regular file, a symlink out of the run, a loop)."""
    problems: list[str] = []
    try:
        st = os.stat(run_path)
    except OSError as exc:
        if getattr(exc, "errno", None) == 40:  # ELOOP
            raise NotATrace(f"{show_path(run_path)} is a symlink loop") from None
        raise NotATrace(f"{show_path(run_path)} does not exist") from None
    if stat.S_ISREG(st.st_mode):
        return [run_path], problems
    if not stat.S_ISDIR(st.st_mode):
        raise NotATrace(f"{show_path(run_path)} is not a regular file or a run directory")
    root = os.path.realpath(run_path)
    paths = []
    try:
        names = shard_names(run_path)
    except OSError as exc:
        raise NotATrace(f"cannot list {show_path(run_path)}: {exc.strerror or exc}") from None
    for name in names:
        p = os.path.join(run_path, name)
        why = _not_a_shard_file(p, root)
        if why:
            problems.append(f"{show_path(name)} {why}; skipped")
        else:
            paths.append(p)
    if not paths and not problems:
        raise NotATrace(f"{show_path(run_path)} holds no flowmap shards (*{tf.SHARD_SUFFIX})")
    return paths, problems


def _not_a_shard_file(p: str, root: str) -> str | None:
    if os.path.islink(p):
        real = os.path.realpath(p)
        if os.path.commonpath([root, real]) != root:
            return "is a symlink out of the run directory"
    try:
        mode = os.stat(p).st_mode
    except OSError as exc:
        return "is a symlink loop" if exc.errno == 40 else f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    return None


def shard_paths(run_path: str) -> list[str]:
    """The shard files of a run directory (or the one file given), sorted for determinism."""
    return scan_run(run_path)[0]


def has_hop_line(path: str, chunk: int = 1 << 20) -> bool:
    """Whether shard `path` holds a line that records a hop, found by its first bytes
    (`trace_format.HOP_LINE_STARTS`) without decoding: settles a busy run at once."""
    lines = tuple(b"\n" + start for start in tf.HOP_LINE_STARTS)
    span = max(map(len, lines))
    tail = b""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            edge = tail + block[:span]
            if any(line in block or line in edge for line in lines):
                return True
            tail = block[-span:]
    return False
