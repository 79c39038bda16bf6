"""`flowmap top`: the run's seams, redrawn about once a second, in the manner of `py-spy top`.

The first screen comes as soon as the first poll is read (a large run is
read in bounded pieces, so that is within a second); later screens follow
each update of the watch, every `UPDATE_S` (a hop shows within that), and
each key. Keys are read from the terminal in cbreak mode, without
echo, and the terminal is restored on any exit. When the program exits or
is cut short, or the run is removed, the last screen stays, with a sentence
saying which.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.live import Live

from flowmap.live.screen import SORTS, screen
from flowmap.live.status import RUNNING
from flowmap.live.watch import UPDATE_S, Frame, Watch

ONCE_WINDOW_S = 1.0  # `--once`: the seconds between its two reads, over which rates are taken


def top_once(path: str, console: Console, sort: str = "rate") -> Frame:
    """Print one screen and return its frame (`--once`): two polls a second apart, so rates show."""
    watch = Watch(path)
    while watch.update().behind:  # a script wants the whole run so far, however large
        pass
    time.sleep(ONCE_WINDOW_S)
    frame = watch.update()
    console.print(screen(frame, sort=sort, width=console.width))
    return frame


def _rows(console: Console) -> int:
    """Seam rows that fit the terminal with the lines around them (title, health, findings)."""
    return max(3, console.height - 14)


def top(path: str, console: Console, sort: str = "rate") -> Frame:
    """Redraw until `q` (or Ctrl-C); returns the last frame."""
    # without a terminal, top ends with the program: the ended run's frame is its last
    watch = Watch(path)
    paused = False
    frame = watch.update()
    with _keys() as read_key, Live(screen(frame, sort=sort, rows=_rows(console),
                                          width=console.width), console=console,
                                   auto_refresh=False, screen=False, transient=False) as live:
        next_s = time.monotonic() + UPDATE_S
        while True:
            key = read_key(max(0.0, next_s - time.monotonic()))
            if key in ("q", "Q", "\x03"):
                break
            if key in SORTS:
                sort = SORTS[key]
            elif key in ("p", "P", " "):
                paused = not paused
            now = time.monotonic()
            if now >= next_s:
                next_s = now + UPDATE_S
                if not paused:
                    frame = watch.update()
            elif key is None:
                continue
            live.update(screen(frame, sort=sort, paused=paused, rows=_rows(console),
                               width=console.width), refresh=True)
            if (frame.gone or frame.status.state != RUNNING) and not _interactive():
                break  # nobody to press `q`: the last screen stays printed
    return frame


def _interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], str | None]]:
    """A function reading one key with a timeout (None: none came); stdin in cbreak mode."""
    fd = sys.stdin.fileno() if _interactive() else None
    if fd is None:
        def wait(timeout: float) -> str | None:
            time.sleep(timeout)
            return None

        yield wait
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)

        def read(timeout: float) -> str | None:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            return os.read(fd, 1).decode("latin-1")

        yield read
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
