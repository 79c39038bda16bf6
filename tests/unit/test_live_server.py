"""`flowmap serve`'s HTTP server under load and misuse: HEAD, a real backlog, request
timeouts that keep half-sent requests from piling up threads, and an IPv6 bind."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest
import runs

from flowmap.live.serve import BACKLOG, MAX_THREADS, LiveServer


def _served(tmp_path, host: str = "127.0.0.1") -> LiveServer:
    run = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=2))
    server = LiveServer(run, host=host, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_head_is_answered_as_get_without_a_body(tmp_path):
    server = _served(tmp_path)
    try:
        host, port = server.http.server_address[:2]
        for route in ("/", "/data.json", "/metrics"):
            c = http.client.HTTPConnection(host, port, timeout=10)
            c.request("GET", route)
            get = c.getresponse()
            body = get.read()
            c.close()
            c = http.client.HTTPConnection(host, port, timeout=10)
            c.request("HEAD", route)
            head = c.getresponse()
            assert head.status == 200 and head.read() == b""
            assert head.getheader("Content-Type") == get.getheader("Content-Type")
            assert int(head.getheader("Content-Length")) > 0 and len(body) > 0
            c.close()
    finally:
        server.shutdown()


def test_half_sent_requests_do_not_pile_up_threads(tmp_path):
    # GIVEN a server, and 300 connections that each send half a request and wait
    server = _served(tmp_path)
    host, port = server.http.server_address[:2]
    socks = []
    try:
        for _ in range(300):
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line: never complete
            socks.append(s)
        time.sleep(1.0)
        # THEN at most MAX_THREADS of them hold a thread (not 300)
        assert threading.active_count() <= MAX_THREADS + 8
        # AND once they are gone, a request is answered
        for s in socks:
            s.close()
        socks = []
        deadline = time.monotonic() + 15
        while True:
            try:
                c = http.client.HTTPConnection(host, port, timeout=10)
                c.request("GET", "/metrics")
                assert c.getresponse().status == 200
                break
            except (ConnectionError, http.client.RemoteDisconnected):
                assert time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        for s in socks:
            s.close()
        server.shutdown()


def test_the_listen_backlog_is_a_real_one(tmp_path):
    server = _served(tmp_path)
    try:
        assert server.http.request_queue_size == BACKLOG >= 128
    finally:
        server.shutdown()


def test_an_ipv6_address_binds(tmp_path):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    server = _served(tmp_path, host="::1")
    try:
        assert server.url.startswith("http://[::1]:")
        c = http.client.HTTPConnection("::1", server.http.server_address[1], timeout=10)
        c.request("GET", "/metrics")
        assert c.getresponse().status == 200
    finally:
        server.shutdown()


def test_the_page_data_gives_bytes_per_second_while_the_run_grows(tmp_path):
    # GIVEN serve over a run still being written
    import json
    import urllib.request

    from flowmap.live.watch import UPDATE_S

    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    w.hop(10, "rollout", "buffer", "traj", [runs.tensor("t", (256,))])
    w.close(20, clean=False)
    server = LiveServer(str(tmp_path / "run"), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # WHEN hops keep coming for a few updates
        for i in range(4):
            time.sleep(UPDATE_S)
            for k in range(10):
                w.hop(30 + 100 * i + k, "rollout", "buffer", "traj", [runs.tensor("t", (256,))])
            w.close(1000 + i, clean=False)
        time.sleep(1.5 * UPDATE_S)
        with urllib.request.urlopen(f"{server.url}data.json", timeout=30) as r:
            doc = json.loads(r.read())
        # THEN the page's data has the seam's bytes/s beside its bytes per step
        (seam,) = doc["seams"]
        assert doc["live"]["state"] == "running"
        assert doc["live"]["bytes_per_s"][seam["id"]] > 0
    finally:
        server.shutdown()
