"""Pictures of `flowmap report` at 80 and 120 columns, as a terminal shows them.

    python scripts/report_screenshot.py              # traces examples/grpo_tiny.py (~30 s) first
    python scripts/report_screenshot.py RUN          # or any run you already have
    python scripts/report_screenshot.py RUN --docs   # rewrite docs/images/report-{80,120}.png (tracked)

The report is laid out by the same code as `flowmap report --width N`, recorded
by rich, exported as HTML and shot by headless Chromium (found as in
scripts/screenshot.py). The PNGs go to `out/` (git-ignored) unless `--docs` or
`-o DIR` says otherwise; only the first `--rows` lines are shot, one screen.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile

from screenshot import FLAGS, REPO, _chromium, _trace_trainer

WIDTHS = (80, 120)
CHAR_PX = 8.43  # DejaVu Sans Mono at 14 px: one cell
LINE_PX = 17.5


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", help="run directory (default: trace examples/grpo_tiny.py now)")
    p.add_argument("-o", "--out", help="directory for the PNGs (default: out/, git-ignored)")
    p.add_argument("--docs", action="store_true", help="write into docs/images (tracked)")
    p.add_argument("--rows", type=int, default=60, help="lines shot per picture (default: %(default)s)")
    args = p.parse_args(argv)
    chromium = _chromium()
    if chromium is None:
        print("report_screenshot: no Chromium found; install it or set FLOWMAP_CHROMIUM", file=sys.stderr)
        return 1
    out = os.path.abspath(args.out or os.path.join(REPO, "docs" if args.docs else "out",
                                                  *(("images",) if args.docs else ())))
    if not args.out and not args.docs:
        os.makedirs(out, exist_ok=True)  # the git-ignored default
    if not os.path.isdir(out):
        print(f"report_screenshot: {out} is not a directory", file=sys.stderr)
        return 2
    os.chdir(REPO)  # the report shows the run's path: keep it short
    run_path = args.run or _trace_trainer()
    import flowmap

    view = flowmap.load(run_path).view
    with tempfile.TemporaryDirectory(prefix="flowmap-report-shot-") as tmp:
        for width in WIDTHS:
            page = os.path.join(tmp, f"report-{width}.html")
            rows = _write_page(view, width, args.rows, page)
            png = os.path.join(out, f"report-{width}.png")
            _shoot(chromium, page, png, width, rows, os.path.join(tmp, f"profile-{width}"))
            print(png)
    return 0


def _write_page(view: object, width: int, rows: int, page: str) -> int:
    """The report's first `rows` lines as an HTML page with the terminal's colours."""
    from rich.console import Console
    from rich.terminal_theme import MONOKAI
    from rich.text import Text

    from flowmap.reporters.terminal import report_lines

    lines = report_lines(view, width)[:rows]  # type: ignore[arg-type]
    # one spare cell: rich folds a line that fills its console's width exactly, which
    # `flowmap report --width N` (writing plain lines) never does
    console = Console(record=True, width=width + 1, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor")

    for line, style in lines:
        console.print(Text(line, style=style), no_wrap=True, overflow="ignore", crop=False)
    html = console.export_html(theme=MONOKAI, inline_styles=True, code_format=(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><style>"
        "body{{margin:0;background:{background};color:{foreground}}}"
        "pre{{margin:0;padding:12px;font:14px/17.5px 'DejaVu Sans Mono',monospace}}"
        "</style></head><body><pre><code>{code}</code></pre></body></html>"))
    with open(page, "w", encoding="utf-8") as f:
        f.write(html)
    return len(lines)


def _shoot(chromium: str, page: str, png: str, width: int, rows: int, profile: str) -> None:
    if os.path.exists(png):
        os.remove(png)  # a failed shot cannot pass for a new one
    size = f"{int(width * CHAR_PX) + 24 + 8},{int(rows * LINE_PX) + 24}"
    cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
           f"--window-size={size}", "--hide-scrollbars", "file://" + page]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not os.path.exists(png):
        raise SystemExit(f"report_screenshot: Chromium failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")


if __name__ == "__main__":
    sys.exit(main())
