"""Drive headless Chromium through the DevTools protocol over a pipe — no port, no dependency.

`--remote-debugging-pipe` makes Chromium read protocol commands from fd 3 and
write replies and events to fd 4, each message JSON ending in a NUL byte.
That is all a test needs (open a file, evaluate, click, screenshot, collect
console errors and network requests), in ~150 lines instead of a Playwright
install; and with no debugging port, nothing listens even on loopback.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any

# The flags the project runs Chromium with (as root, in containers, offline).
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """`$FLOWMAP_CHROMIUM`, else the first Chromium-family browser on PATH."""
    env = os.environ.get("FLOWMAP_CHROMIUM")
    if env:
        return env if os.path.exists(env) else shutil.which(env)
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class ProtocolError(RuntimeError):
    pass


class Browser:
    """One Chromium process with a fresh profile; use as a context manager."""

    def __init__(self, binary: str, timeout_s: float = 20.0) -> None:
        self.binary = binary
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="flowmap-chromium-")
        self.events: list[dict[str, Any]] = []
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0

    def __enter__(self) -> Browser:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Move the child's ends above 3 and 4 so the dup2s in the child cannot clobber them.
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def wire_fds() -> None:  # runs in the child between fork and exec
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._log = open(os.path.join(self.profile, "chromium.log"), "wb")
        self.proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            pass_fds=(3, 4), preexec_fn=wire_fds,
        )
        os.close(high_r)
        os.close(high_w)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call("Browser.close", timeout_s=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                self._inbox.put(None)
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for m in messages:
                self._inbox.put(json.loads(m))

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float | None = None) -> dict[str, Any]:
        """Send one command and wait for its reply; events that arrive meanwhile are kept."""
        self._next_id += 1
        my_id = self._next_id  # a dialog handled while waiting sends a command of its own
        msg: dict[str, Any] = {"id": my_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._next(timeout_s)
            if reply.get("id") == my_id:
                if "error" in reply:
                    raise ProtocolError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_event(self, method: str, session: str | None = None, timeout_s: float | None = None) -> dict:
        """The first event `method` (for `session`) not consumed yet, waiting for it if needed."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if ev["method"] == method and ev.get("sessionId") == session and not ev.get("_used"):
                    ev["_used"] = True
                    return ev
            seen = len(self.events)
            self._next(deadline - time.monotonic())

    def _next(self, timeout_s: float | None) -> dict[str, Any]:
        try:
            msg = self._inbox.get(timeout=max(0.01, timeout_s or self.timeout_s))
        except queue.Empty:
            raise TimeoutError("Chromium did not answer in time") from None
        if msg is None:
            raise ProtocolError(f"Chromium exited (code {self.proc.poll()}); see {self._log.name}")
        if "method" in msg:
            self.events.append(msg)
            if msg["method"] == "Page.javascriptDialogOpening":  # never let a dialog block the page
                self.call("Page.handleJavaScriptDialog", {"accept": True}, msg.get("sessionId"))
        return msg

    def new_page(self, width: int = 1600, height: int = 1000) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        return Page(self, session)

    def open_report(self, path: str, fragment: str = "", width: int = 1280,
                    height: int = 800) -> Page:
        """A flowmap HTML page, loaded and past its start-up script (`data-ready`)."""
        page = self.new_page(width, height)
        page.goto("file://" + os.path.abspath(path) + fragment)
        assert page.eval("document.body.getAttribute('data-ready')") == "1", page.errors()
        return page


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def call(self, method: str, params: dict | None = None) -> dict[str, Any]:
        return self.browser.call(method, params, self.session)

    def goto(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})
        self.browser.wait_event("Page.loadEventFired", self.session)

    def eval(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise ProtocolError(f"{expression!r} threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A real mouse click at page coordinates (CSS pixels)."""
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def screenshot(self, path: str) -> str:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def _events(self, method: str) -> list[dict[str, Any]]:
        return [e["params"] for e in self.browser.events if e["method"] == method and e.get("sessionId") == self.session]

    def errors(self) -> list[str]:
        """Uncaught exceptions, console.error/assert, and browser log errors (CSP violations among them)."""
        out = [json.dumps(e["exceptionDetails"])[:500] for e in self._events("Runtime.exceptionThrown")]
        out += [json.dumps(e["args"])[:500] for e in self._events("Runtime.consoleAPICalled")
                if e["type"] in ("error", "assert")]
        out += [e["entry"].get("text", "") for e in self._events("Log.entryAdded") if e["entry"]["level"] == "error"]
        return out

    def requests(self) -> list[str]:
        return [e["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def dialogs(self) -> list[str]:
        return [e.get("message", "") for e in self._events("Page.javascriptDialogOpening")]
