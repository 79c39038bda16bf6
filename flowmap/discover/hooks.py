"""How the interpreter tells the watch of calls: a profile function (3.11) or sys.monitoring (3.12+).

Python 3.11 and older report every call and return, C calls included, to one profile
function per thread (`sys.setprofile`, and `threading.setprofile` for threads started
later); no line events, unlike `settrace`. Where `crelay.c` is built, that function is a C
relay: it answers the C events and the code the watch decided to leave alone itself, so
the Python hook below sees a call of code not decided yet and the calls and returns of
code it follows. Being C, it also pushes no Python frame at each event, which made CPython
3.11 map and unmap a frame-stack chunk again and again (docs/seam-maps.md). Python 3.12+:
`sys.monitoring` PY_START/PY_RETURN, answering DISABLE for every code object that is not
watched, so the interpreter stops reporting it at all.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, FrameType, ModuleType
from typing import Any, Protocol

from flowmap import environment
from flowmap.discover.filters import CodeInfo

crelay: ModuleType | None = None
if not environment.pure_python():
    try:
        from flowmap.discover import crelay
    except ImportError:  # not compiled (an install without a C compiler): the Python hook alone
        pass

_MISSING = object()


class Watched(Protocol):
    """What a hook calls: the watch (`flowmap.discover.watch.Watcher`)."""

    cache: dict[CodeType, CodeInfo | None]
    stopped: bool

    def decide_code(self, code: CodeType, frame: FrameType) -> CodeInfo | None: ...
    def enter(self, info: CodeInfo, frame: FrameType) -> None: ...
    def leave(self, info: CodeInfo, frame: FrameType, value: Any) -> None: ...


@dataclass(slots=True)
class Hook:
    """One watch's hold on the interpreter: the C relay (kept across a restart after a fork,
    its decisions with it) or the sys.monitoring tool id."""

    relay: Any = None  # `crelay.Relay`
    tool: int | None = None


def start(watched: Watched, hook: Hook | None) -> Hook:
    """Report this thread's calls, and those of threads started from now on, to `watched`."""
    hook = hook or Hook()
    if sys.version_info >= (3, 12):
        hook.tool = _start_monitoring(watched)
        return hook
    python_hook = profile_hook(watched)
    if crelay is None:  # not built: every event reaches the Python hook
        threading.setprofile(python_hook)
        sys.setprofile(python_hook)
        return hook
    if hook.relay is None:
        hook.relay = crelay.Relay(watched.cache, python_hook)
    threading.setprofile(hook.relay)
    hook.relay.install()
    return hook


def stop(hook: Hook | None) -> None:
    """No more reports: this thread's and new threads' at once, other threads' at their next
    event (a relay that is off takes itself away)."""
    if hook is not None and hook.tool is not None:
        mon = sys.monitoring  # type: ignore[attr-defined]
        mon.set_events(hook.tool, 0)
        mon.free_tool_id(hook.tool)
        hook.tool = None
        return
    if hook is not None and hook.relay is not None:
        hook.relay.off = 1
    threading.setprofile(None)
    sys.setprofile(None)


def quiet_import(plain: Callable[..., Any], hook: Hook | None,
                 stopped: Callable[[], bool]) -> Callable[..., Any]:
    """`plain` (builtins.__import__) run with the profile function off, while it is on and
    the watch has not stopped: an import runs millions of calls, none a hand-over. In C with
    the relay (no Python frame at each `import` statement run)."""
    if hook is not None and hook.relay is not None and crelay is not None:
        in_c: Callable[..., Any] = crelay.QuietImport(plain, hook.relay)
        return in_c

    def quiet(*args: Any, **kwargs: Any) -> Any:
        profile = sys.getprofile()
        if profile is None or stopped():
            return plain(*args, **kwargs)
        sys.setprofile(None)
        try:
            return plain(*args, **kwargs)
        finally:
            if not stopped():
                sys.setprofile(profile)

    return quiet


def profile_hook(watched: Watched) -> Callable[[FrameType, str, Any], None]:
    """The Python hook: (frame, event, arg), as `sys.setprofile` calls it."""
    cache = watched.cache
    enter, leave, decide_code = watched.enter, watched.leave, watched.decide_code

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if watched.stopped:
                sys.setprofile(None)
                return
            code = frame.f_code
            info = cache.get(code, _MISSING)
            if info is _MISSING:
                info = decide_code(code, frame)
            if info is not None:
                enter(info, frame)  # type: ignore[arg-type]
        elif event == "return":
            info = cache.get(frame.f_code)
            if info is not None and info.stats is not None and not watched.stopped:
                leave(info, frame, arg)

    return hook


def _start_monitoring(watched: Watched) -> int | None:
    mon = sys.monitoring  # type: ignore[attr-defined]
    for tool in (mon.PROFILER_ID, 3, 4):
        if mon.get_tool(tool) is None:
            mon.use_tool_id(tool, "flowmap discover")
            break
    else:
        sys.stderr.write("flowmap: discover: every sys.monitoring tool id is taken; "
                         "nothing is watched in this process.\n")
        watched.stopped = True
        return None
    cache = watched.cache
    enter, leave, decide_code = watched.enter, watched.leave, watched.decide_code
    disable = mon.DISABLE
    getframe = sys._getframe

    def py_start(code: CodeType, offset: int) -> Any:
        info = cache.get(code, _MISSING)
        if info is _MISSING:
            info = decide_code(code, getframe(1))
        if info is None:
            return disable
        enter(info, getframe(1))  # type: ignore[arg-type]
        return None

    def py_return(code: CodeType, offset: int, value: Any) -> Any:
        info = cache.get(code)
        if info is None or info.stats is None:
            return disable
        leave(info, getframe(1), value)
        return None

    def py_unwind(code: CodeType, offset: int, exc: BaseException) -> None:
        info = cache.get(code)
        if info is not None and info.stats is not None:
            leave(info, getframe(1), None)

    ev = mon.events
    mon.register_callback(tool, ev.PY_START, py_start)
    mon.register_callback(tool, ev.PY_RETURN, py_return)
    mon.register_callback(tool, ev.PY_UNWIND, py_unwind)
    mon.set_events(tool, ev.PY_START | ev.PY_RETURN | ev.PY_UNWIND)
    return int(tool)
