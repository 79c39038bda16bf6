"""The live page (`flowmap serve`) in headless Chromium: bytes/s beside bytes per step."""

from __future__ import annotations

import threading
import time

import runs

from flowmap.live.serve import LiveServer
from flowmap.live.watch import UPDATE_S


def test_the_live_page_shows_bytes_per_second_beside_bytes_per_step(tmp_path, browser):
    # GIVEN serve over a run still being written, and its page open
    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    w.hop(10, "rollout", "buffer", "traj", [runs.tensor("t", (256,))])
    w.close(20, clean=False)
    server = LiveServer(str(tmp_path / "run"), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = browser.new_page(1400, 900)
        page.goto(server.url)
        # WHEN hops keep coming
        for i in range(4):
            time.sleep(UPDATE_S)
            for k in range(10):
                w.hop(30 + 100 * i + k, "rollout", "buffer", "traj", [runs.tensor("t", (256,))])
            w.close(1000 + i, clean=False)
        # THEN the seams table has a bytes/s column, and the seam's rate in it
        deadline = time.monotonic() + 15
        heads = rate = None
        while time.monotonic() < deadline:
            heads = page.eval("Array.from(document.querySelectorAll('#seams thead th'))"
                              ".map(function (t) { return t.textContent; })")
            rate = page.eval("(document.querySelector('#seams tr[data-seam] td.live-rate') || {})"
                             ".textContent")
            if rate:
                break
            time.sleep(0.3)
        assert heads == ["seam", "bytes in total", "hops", "bytes/s", "transport"]  # no steps
        assert rate and rate.endswith("/s") and not rate.startswith("0 B")
        assert not page.errors(), page.errors()
    finally:
        server.shutdown()
