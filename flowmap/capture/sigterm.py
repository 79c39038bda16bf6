"""Close the shard on SIGTERM, then die of it, as promptly as an untraced program would.

Two things stand between a handler written in Python and the SIG_DFL death the
program expects:

- Python runs a handler in the main thread, at its next bytecode or when a
  blocking call there is interrupted. A SIGTERM landing just before the main
  thread goes to sleep (a `Pool` worker entering `get` as `terminate` comes)
  interrupts nothing, and the process that SIG_DFL would have ended sleeps for
  ever: about one run in ten of a traced `with Pool(2)` block, under load. The
  C half (`csigterm.c`, Linux) sends the signal to the main thread again until
  the handler has run.
- A transport wrapper sends first and records after (the bytes it records are
  the ones that went out). Handled between the two, SIGTERM would close the
  shard without that send half, and the receiver's half of a message that did
  arrive would read as from `(untraced)`: a `Pool` terminates its workers as
  soon as their last results are in, which is exactly then. So a wrapper holds
  SIGTERM across its send (`hold`/`release`) and one that arrives meanwhile is
  handled as the release ends. A send blocked for good (a full pipe nobody
  reads) does not hold the process hostage: after `GIVE_UP_S` the signal is
  handled anyway.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from flowmap.capture import forksafe

GIVE_UP_S = 0.5

_holding: dict[int, int] = {}  # thread id -> depth of its send windows (each thread writes its own)
_pending: list[bool] = []  # a SIGTERM arrived while a send was held
_give_up: list[bool] = []
_dying: list[bool] = []


def _forget_holds() -> None:
    """A forked child has one thread: the holds of its parent's other threads are not its own."""
    for state in (_holding, _pending, _give_up, _dying):
        state.clear()


forksafe.at_fork(after_in_child=_forget_holds)


def finish_on_sigterm(fn: Callable[[], None]) -> bool:
    """Run `fn` (close the shard) on SIGTERM, then die of SIGTERM as the program would have.
    Whether a handler that is sent SIGTERM again until it runs (`csigterm.c`) is in place."""
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False  # the program's own, or ours already
        signal.signal(signal.SIGTERM, functools.partial(_on_sigterm, fn))
    except (ValueError, OSError):  # not the main thread, or no signals here
        return False
    try:
        from flowmap.capture import csigterm
    except ImportError:  # not built (no compiler at install): the handler alone, as before
        return False
    return csigterm.arm()


def hold() -> None:
    """This thread is between sending a message and recording it."""
    ident = threading.get_ident()
    _holding[ident] = _holding.get(ident, 0) + 1


def settle(timeout: float = GIVE_UP_S) -> None:
    """Wait, `timeout` at most, for the sends other threads have in flight to be recorded.

    A process that ends without joining its queue's feeder thread (torch's DataLoader
    worker cancels that join once it is told to stop) would close its shard between a
    message the feeder sent, which the receiver got, and its record: the receiver's half
    would then come from `(untraced)`. Never raises."""
    try:
        me = threading.get_ident()
        deadline = time.monotonic() + timeout
        while not _give_up and any(t != me for t in list(_holding)) \
                and time.monotonic() < deadline:
            time.sleep(0.001)
    except Exception:
        pass


def release() -> None:
    """This thread's send is recorded: a SIGTERM that waited for it is handled now."""
    ident = threading.get_ident()
    depth = _holding.pop(ident, 1) - 1
    if depth > 0:
        _holding[ident] = depth
    elif _pending and not _holding:
        _pending.clear()
        _resend()


def _on_sigterm(fn: Callable[[], None], signum: int, frame: Any) -> None:
    if _dying:  # sent again (the refire) while closing: one close, not one inside another
        return
    if _holding and not _give_up:
        if not _pending:
            _pending.append(True)
            try:
                threading.Thread(target=_give_up_later, name="flowmap-sigterm", daemon=True).start()
            except Exception:  # no thread to be had: handle it now
                _die(fn)
        return
    _die(fn)


def _die(fn: Callable[[], None]) -> None:
    _dying.append(True)
    try:
        fn()
    finally:  # the program dies of its SIGTERM whatever closing the shard did
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _give_up_later() -> None:
    threading.Event().wait(GIVE_UP_S)
    if _pending:
        _give_up.append(True)
        _resend()


def _resend() -> None:
    """Deliver SIGTERM again; Python runs its handler in the main thread, whichever thread
    released."""
    try:
        os.kill(os.getpid(), signal.SIGTERM)
    except OSError:
        pass
