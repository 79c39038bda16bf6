"""Pictures of `flowmap top` and of the live page (`flowmap serve`) while a run goes on.

    python scripts/live_screenshot.py            # traces examples/grpo_tiny.py, shoots mid-run
    python scripts/live_screenshot.py -o DIR     # somewhere else than out/ (git-ignored)

The trainer runs traced in the background; a few seconds in, the `top`
screen is drawn by the same code as `flowmap top` (recorded by rich, shot
by headless Chromium as a terminal would show it), and the live page is
served on loopback and shot as a browser shows it. The PNGs go to `out/`
(git-ignored) unless `-o` says otherwise.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import threading
import time

from screenshot import FLAGS, REPO, _chromium

DEFAULT_OUT = os.path.join(REPO, "out")  # git-ignored
WIDTH, ROWS = 130, 34
CHAR_PX, LINE_PX = 8.43, 17.5  # DejaVu Sans Mono at 14 px


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", default=DEFAULT_OUT, help="directory for the PNGs (default: out/)")
    p.add_argument("--hops", type=int, default=3000, help="shoot once the run has this many hops")
    args = p.parse_args(argv)
    chromium = _chromium()
    if chromium is None:
        print("live_screenshot: no Chromium found; install it or set FLOWMAP_CHROMIUM", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flowmap-live-shot-", ignore_cleanup_errors=True) as tmp:
        run = os.path.join(tmp, "grpo_tiny")
        trainer = subprocess.Popen(
            [sys.executable, "-m", "flowmap", "trace", "-o", run,
             os.path.join(REPO, "examples", "grpo_tiny.py")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for_hops(run, args.hops)
            print(_shoot_top(chromium, run, args.out, tmp))
            print(_shoot_page(chromium, run, args.out, tmp))
        finally:
            try:
                trainer.wait(timeout=300)  # let it close its shards (and its ranks theirs)
            except subprocess.TimeoutExpired:
                trainer.kill()
                trainer.wait()
    return 0


def _wait_for_hops(run: str, hops: int, timeout_s: float = 240.0) -> None:
    from flowmap.model.run import Run
    from flowmap.read.incremental import IncrementalReader

    reader = IncrementalReader(run)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if os.path.isdir(run):
            reader.poll()
            if reader.num_shards and reader.records(Run).num_hops >= hops:
                return
        time.sleep(0.5)
    raise SystemExit(f"live_screenshot: the run had not {hops} hops after {timeout_s:.0f} s")


def _shoot_top(chromium: str, run: str, out: str, tmp: str) -> str:
    from rich.console import Console
    from rich.terminal_theme import MONOKAI

    from flowmap.live.screen import screen
    from flowmap.live.watch import Watch

    watch = Watch(run)
    watch.update()
    time.sleep(2.0)  # two polls: the rates need a window
    frame = watch.update()
    console = Console(record=True, width=WIDTH, height=ROWS, file=io.StringIO(),
                      force_terminal=True, color_system="truecolor")
    console.print(screen(frame, rows=ROWS - 14, width=WIDTH))
    page = os.path.join(tmp, "top.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(console.export_html(theme=MONOKAI, inline_styles=True, code_format=(
            "<!DOCTYPE html><html><head><meta charset='utf-8'><style>"
            "body{{margin:0;background:{background};color:{foreground}}}"
            "pre{{margin:0;padding:12px;font:14px/17.5px 'DejaVu Sans Mono',monospace}}"
            "</style></head><body><pre><code>{code}</code></pre></body></html>")))
    png = os.path.join(out, "live-top.png")
    size = f"{int(WIDTH * CHAR_PX) + 32},{int(ROWS * LINE_PX) + 24}"
    _chromium_shot(chromium, "file://" + page, png, size, os.path.join(tmp, "profile-top"))
    return png


def _shoot_page(chromium: str, run: str, out: str, tmp: str) -> str:
    from flowmap.live.serve import LiveServer

    server = LiveServer(run, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        png = os.path.join(out, "live-page.png")
        _chromium_shot(chromium, server.url, png, "1400,900", os.path.join(tmp, "profile-page"))
    finally:
        server.shutdown()
    return png


def _chromium_shot(chromium: str, url: str, png: str, size: str, profile: str) -> None:
    if os.path.exists(png):
        os.remove(png)  # a failed shot cannot pass for a new one
    cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
           f"--window-size={size}", "--hide-scrollbars", "--virtual-time-budget=3000", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not os.path.exists(png):
        raise SystemExit(f"live_screenshot: Chromium failed ({proc.returncode}): "
                         f"{proc.stderr.strip()[-500:]}")


if __name__ == "__main__":
    sys.exit(main())
