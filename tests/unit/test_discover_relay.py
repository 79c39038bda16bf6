"""The watch's C profile relay (`crelay.c`): which events reach the Python hook, and its imports.

The relay decides nothing itself: it keeps the Python hook's decisions (its cache) on the code
objects and answers the events that need no hook. So what the hook is shown must be exactly
what it asked for, and the watch must read the same with the relay as without it.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import textwrap
import threading
from types import FrameType
from typing import Any

import pytest

if sys.version_info >= (3, 12):
    pytest.skip("3.12+ watches through sys.monitoring, with no profile function",
                allow_module_level=True)
crelay = pytest.importorskip("flowmap.discover.crelay")


def followed() -> int:
    return len([1, 2])  # a C call inside: never shown to the hook


def left_alone() -> int:
    return followed() + len("ab")


class Hook:
    """A Python hook that follows `followed` and leaves every other code alone, as the
    watch's does: its decision goes into the cache at a code's first call."""

    def __init__(self) -> None:
        self.cache: dict[Any, Any] = {}
        self.events: list[tuple[str, str]] = []

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if code.co_name in ("followed", "left_alone"):  # pytest's own calls are not the test's
            self.events.append((event, code.co_name))
        if event == "call" and code not in self.cache:
            self.cache[code] = "info" if code is followed.__code__ else None


def profiled(relay: Any, fn: Any) -> None:
    relay.install()
    try:
        fn()
    finally:
        sys.setprofile(None)


def test_only_undecided_calls_and_followed_code_reach_the_hook():
    hook = Hook()
    relay = crelay.Relay(hook.cache, hook)
    # WHEN both functions run three times under the relay
    profiled(relay, lambda: [left_alone() for _ in range(3)])
    # THEN the left-alone code reached the hook once (its first call, to be decided), never
    # its return; the followed code's every call and return did; no C call reached it
    assert hook.events == [("call", "left_alone"), ("call", "followed"), ("return", "followed"),
                           ("call", "followed"), ("return", "followed"),
                           ("call", "followed"), ("return", "followed")]
    assert sys.getprofile() is None


def test_a_second_relay_decides_anew():
    # GIVEN code decided by one relay's watch
    first = Hook()
    profiled(crelay.Relay(first.cache, first), left_alone)
    # WHEN another watch (its own cache) runs the same code
    second = Hook()
    profiled(crelay.Relay(second.cache, second), left_alone)
    # THEN it is asked again: a decision kept on the code belongs to the relay that kept it
    assert ("call", "left_alone") in second.events


def test_off_takes_the_relay_off_at_the_next_event():
    hook = Hook()
    relay = crelay.Relay(hook.cache, hook)
    relay.install()
    try:
        relay.off = 1
        left_alone()
        assert sys.getprofile() is None  # taken off by the event of the call above
    finally:
        sys.setprofile(None)
    assert hook.events == []


def test_a_new_thread_takes_the_relay_through_threading_setprofile():
    hook = Hook()
    relay = crelay.Relay(hook.cache, hook)
    seen: list[Any] = []

    def body() -> None:
        left_alone()
        seen.append(sys.getprofile())

    threading.setprofile(relay)
    try:
        t = threading.Thread(target=body)
        t.start()
        t.join()
    finally:
        threading.setprofile(None)
    # THEN the thread's calls reached the hook, through the relay still in place
    assert ("call", "followed") in hook.events and ("return", "followed") in hook.events
    assert seen == [relay]


def test_a_hook_that_raises_is_taken_off_and_its_error_propagates():
    # as Python's own trampoline does with a Python hook
    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if frame.f_code is followed.__code__:
            raise RuntimeError("hook failed")

    relay = crelay.Relay({}, hook)
    relay.install()
    try:
        with pytest.raises(RuntimeError, match="hook failed"):
            followed()
        assert sys.getprofile() is None
    finally:
        sys.setprofile(None)


def test_relay_rejects_what_is_not_a_profile_call():
    relay = crelay.Relay({}, Hook())
    with pytest.raises(TypeError):
        relay(1, 2)
    with pytest.raises(TypeError):
        relay(None, "call", None)  # not a frame
    with pytest.raises(TypeError):
        crelay.Relay([], Hook())  # the cache is a dict
    with pytest.raises(TypeError):
        crelay.Relay({}, 3)


MODULE = """
def made_at_import():
    return 1

VALUE = made_at_import()
"""


def test_an_import_runs_with_the_relay_off_and_it_comes_back(tmp_path, monkeypatch):
    name = f"relay_quiet_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[str] = []

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        seen.append(frame.f_code.co_name)

    relay = crelay.Relay({}, hook)
    plain = builtins.__import__
    quiet = crelay.QuietImport(plain, relay)
    builtins.__import__ = quiet
    relay.install()
    try:
        exec(f"import {name}", {})  # an `import` statement: through builtins.__import__
        after_import = sys.getprofile()
        with pytest.raises(ModuleNotFoundError):
            exec("import flowmap_no_such_module_anywhere", {})
        after_failed = sys.getprofile()
    finally:
        sys.setprofile(None)
        builtins.__import__ = plain
        sys.modules.pop(name, None)
    # THEN nothing the import ran reached the hook, and the relay was back after each import
    assert "made_at_import" not in seen
    assert after_import is relay and after_failed is relay


def test_quiet_import_passes_through_once_the_relay_is_off():
    relay = crelay.Relay({}, Hook())
    quiet = crelay.QuietImport(builtins.__import__, relay)
    relay.install()
    try:
        relay.off = 1
        assert quiet("json") is importlib.import_module("json")
        assert sys.getprofile() is None  # not put back: the watch stopped
    finally:
        sys.setprofile(None)
