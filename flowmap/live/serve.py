"""`flowmap serve`: the HTML page, live, and `/metrics` for Prometheus, from one watch.

Routes: `/` the page (the same self-contained page as `render --html`, whose
script also asks this server for newer data and redraws in place),
`/data.json` the page's data, `/metrics` the Prometheus text exposition
(`flowmap.live.metrics`). One thread updates the watch every `UPDATE_S`;
requests read its latest frame, so a scrape or a page never reads shards.
The page asks `data.json?after=VERSION`, which answers once the data is newer
than VERSION (or after `HOLD_S`): the page shows an update as soon as it is
built, and its data is built once per update, not once per request. Loopback by default: the page shows the run's owner and payload
names and shapes, so binding elsewhere is the caller's explicit choice.

The server holds under load and misuse: HEAD is answered as GET without the
body; the listen backlog is `BACKLOG`, so a burst of connects is queued, not
refused and retried; a request must arrive whole within `REQUEST_TIMEOUT_S`;
and at most `MAX_THREADS` requests are handled at once (a connection past
that is closed), so half-sent requests cannot pile up threads and memory.
An IPv6 address (`--bind ::1`) binds an IPv6 socket.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from flowmap.errors import FlowmapError
from flowmap.live.metrics import registry
from flowmap.live.status import RUNNING
from flowmap.live.watch import UPDATE_S, Frame, Watch
from flowmap.reporters.html import page
from flowmap.reporters.html_data import html_document
from flowmap.reporters.layout import layout_graph
from flowmap.reporters.layout_records import EdgeSpec, Layout, NodeSpec
from flowmap.strict_json import dumps

HOLD_S = 10.0  # how long `data.json?after=VERSION` waits for newer data before answering
BACKLOG = 128  # connections the kernel queues before `accept`
REQUEST_TIMEOUT_S = 10.0  # a request's line and headers must come within this (and each send)
MAX_THREADS = 64  # requests handled at once; a connection past them is closed


class _Server(ThreadingHTTPServer):
    """`ThreadingHTTPServer` with a real backlog and a bound on its threads."""

    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.slots = threading.BoundedSemaphore(MAX_THREADS)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: the client may retry; nothing piles up
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


class _SameLayout:
    """Lays the graph out again only when it changed (owners, seams, their label sizes):
    a running run's graph settles early, and `dot` need not run on every update."""

    def __init__(self) -> None:
        self._key: Any = None
        self._placed: Layout | None = None

    def __call__(self, nodes: list[NodeSpec], edges: list[EdgeSpec], engine: str) -> Layout:
        key = (engine, [(n.id, n.width, n.height) for n in nodes],
               [(e.id, e.src, e.dst, e.label_width, e.label_lines) for e in edges])
        if key != self._key or self._placed is None:
            self._placed, self._key = layout_graph(nodes, edges, engine), key
        return self._placed


class PortInUse(FlowmapError):
    """The port asked for is taken."""


class LiveServer:
    """The watch, its latest page data, and the HTTP server that serves them."""

    def __init__(self, path: str, host: str = "127.0.0.1", port: int = 8765) -> None:
        self.watch = Watch(path)
        self.frame: Frame | None = self.watch.update()
        self._doc_text = ""
        self._doc_run: Any = None
        self._version = 0
        self._place = _SameLayout()
        self._lock = threading.Lock()
        self._doc_lock = threading.Lock()  # one request builds a frame's data; the others wait
        self._updated = threading.Condition()  # notified at each new frame (and at the stop)
        self._frames = 0  # frames set so far
        self._stop = threading.Event()
        self._metrics = registry(lambda: self.frame)  # one: its counters never go down
        try:
            cls = _Server6 if ":" in host else _Server
            self.http = cls((host, port), _handler(self))
        except OSError as exc:
            if exc.errno in (98, 48):  # EADDRINUSE (Linux, macOS)
                raise PortInUse(f"port {port} on {host} is in use; pick another with --port N"
                                ) from None
            raise FlowmapError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{name if ':' not in name else f'[{name}]'}:{port}/"

    def serve_forever(self) -> None:
        updater = threading.Thread(target=self._update_loop, name="flowmap-watch", daemon=True)
        updater.start()
        try:
            self.http.serve_forever(poll_interval=0.5)
        finally:
            self._stop.set()
            self.http.server_close()

    def shutdown(self) -> None:
        self._stop.set()
        with self._updated:
            self._updated.notify_all()
        self.http.shutdown()

    def _update_loop(self) -> None:
        said = ""
        next_s = time.monotonic() + UPDATE_S
        while not self._stop.wait(max(0.0, next_s - time.monotonic())):
            next_s = time.monotonic() + UPDATE_S  # an update every UPDATE_S, whatever it took
            frame: Frame | None
            try:
                frame = self.watch.update()
            except FlowmapError as exc:  # e.g. the run was never there: say so, keep serving
                frame, sentence = self.frame, str(exc)
            else:
                sentence = frame.gone or (frame.status.sentence
                                          if frame.status.state != RUNNING else "")
            with self._lock:
                self.frame = frame
            with self._updated:
                self._frames += 1
                self._updated.notify_all()
            if sentence and sentence != said:
                sys.stderr.write(f"flowmap: {sentence}\n")
                said = sentence

    def document(self) -> str:
        """The page's data for the latest frame: built once per rebuild of the model."""
        with self._lock:
            frame = self.frame
        if frame is None:
            return "{}"
        state = "gone" if frame.gone else frame.status.state
        sentence = frame.gone or frame.status.sentence
        key = (frame.updated_s, frame.found_s, state, sentence)  # a rebuild, new findings
        with self._doc_lock:
            if key != self._doc_run:
                self._build(frame, key, state, sentence)
            return self._doc_text

    def document_after(self, version: int, hold_s: float = HOLD_S) -> str:
        """The page's data once it is newer than `version`, or as it is after `hold_s`."""
        deadline = time.monotonic() + hold_s
        while True:
            with self._updated:
                seen = self._frames
            text = self.document()
            left = deadline - time.monotonic()
            if self._version != version or left <= 0 or self._stop.is_set():
                return text
            with self._updated:  # unless a frame came while the data was built
                if self._frames == seen:
                    self._updated.wait(left)

    def _build(self, frame: Frame, key: Any, state: str, sentence: str) -> None:
        doc = html_document(frame.run.view, "auto", self._place, frame.findings)
        self._version += 1
        doc["live"] = {"version": self._version, "state": state, "sentence": sentence}
        if state == RUNNING:  # bytes/s over the last seconds, beside the page's bytes per step
            ids = {s["label"]: s["id"] for s in doc.get("seams", [])}
            doc["live"]["bytes_per_s"] = {
                ids[label]: round(bps, 1) for (src, dst, name), (bps, _) in frame.rates.items()
                if (label := f"{src} -> {dst} : {name}") in ids}
        if state == RUNNING:  # shards still being written are not cut short
            doc["run"]["truncated"] = False
        self._doc_text = dumps(doc, sort_keys=True, separators=(",", ":"))
        self._doc_run = key

    def html(self) -> str:
        doc = json.loads(self.document())
        return page(doc, f"flowmap live · {self.watch.path}", live=True)

    def metrics(self) -> bytes:
        return generate_latest(self._metrics)


def _handler(server: LiveServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "flowmap"
        sys_version = ""
        timeout = REQUEST_TIMEOUT_S  # on the socket: a half-sent request ends its thread
        head = False

        def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
            self.head = True
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            route = self.path.split("?", 1)[0]
            try:
                if route in ("/", "/index.html"):
                    self._send(200, "text/html; charset=utf-8", server.html().encode("utf-8"))
                elif route == "/data.json":
                    after = _after(self.path)
                    text = server.document() if after is None or self.head \
                        else server.document_after(after)
                    self._send(200, "application/json", text.encode("utf-8"))
                elif route == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, server.metrics())
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if not self.head:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # a scrape every 10 s is not news

    return Handler


def _after(path: str) -> int | None:
    """VERSION of a `data.json?after=VERSION` request (None: answer at once)."""
    for field in path.partition("?")[2].split("&"):
        name, _, value = field.partition("=")
        if name == "after" and value.isdigit() and len(value) < 19:
            return int(value)
    return None


def serve(path: str, host: str, port: int) -> None:
    """Serve until interrupted; says where, once."""
    server = LiveServer(path, host, port)
    sys.stderr.write(f"flowmap: serving {path} at {server.url} (metrics at {server.url}metrics); "
                     "Ctrl-C stops\n")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
