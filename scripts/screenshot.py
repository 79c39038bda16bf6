"""Make the README's picture: the HTML view of the built-in trainer's run, shot by headless Chromium.

    python scripts/screenshot.py                     # traces examples/grpo_tiny.py (~30 s) first
    python scripts/screenshot.py RUN                 # or any run you already have
    python scripts/screenshot.py RUN -o out.png --seam "batcher -> reward : rollout_batch"
    python scripts/screenshot.py --docs              # rewrite docs/images/flowmap-html.png (tracked)

The picture goes to `out/flowmap-html.png` (git-ignored) unless `-o` or `--docs` says otherwise.

The page opens with one seam selected (`#seam=ID` in the URL) so the picture
shows a leaf schema too: by default the seam with the richest schema (most
leaves with a dynamic dim, then most leaves, then most bytes). Without RUN the
trainer is traced into `flowmap-runs/grpo_tiny-screenshot` (git-ignored). Chromium is found as in the browser tests
(`$FLOWMAP_CHROMIUM`, else `chromium` on PATH) and runs offline with a fresh profile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS_OUT = os.path.join(REPO, "docs", "images", "flowmap-html.png")  # tracked: --docs
DEFAULT_OUT = os.path.join(REPO, "out", "flowmap-html.png")  # git-ignored
TRAINER = os.path.join(REPO, "examples", "grpo_tiny.py")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    chromium = _chromium()
    if chromium is None:
        print("screenshot: no Chromium found; install it (apt-get install chromium) or set FLOWMAP_CHROMIUM",
              file=sys.stderr)
        return 1
    out = os.path.abspath(args.out or (DOCS_OUT if args.docs else DEFAULT_OUT))
    os.chdir(REPO)  # the page shows the run's path: keep it short and the same on every machine
    with tempfile.TemporaryDirectory(prefix="flowmap-shot-") as tmp:
        run_path = args.run or _trace_trainer()
        page, seam_id = _render(run_path, os.path.join(tmp, "flowmap.html"), args.seam, args.layout)
        _shoot(chromium, page, seam_id, out, args.width, args.height, os.path.join(tmp, "profile"))
    print(out)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", help="run directory (default: trace examples/grpo_tiny.py now)")
    p.add_argument("-o", "--out", default=None, help="PNG to write (default: out/flowmap-html.png, git-ignored)")
    p.add_argument("--docs", action="store_true", help="write docs/images/flowmap-html.png (tracked)")
    p.add_argument("--seam", help="label of the seam to select, e.g. 'batcher -> reward : rollout_batch'")
    p.add_argument("--layout", default="auto", choices=("auto", "dot", "layered"))
    p.add_argument("--width", type=int, default=1600)
    p.add_argument("--height", type=int, default=1000)
    return p


def _chromium() -> str | None:
    env = os.environ.get("FLOWMAP_CHROMIUM")
    if env:
        return env if os.path.exists(env) else shutil.which(env)
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    return next((p for p in map(shutil.which, names) if p), None)


def _trace_trainer() -> str:
    run_dir = os.path.join("flowmap-runs", "grpo_tiny-screenshot")  # git-ignored; kept for a look
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"screenshot: tracing {os.path.relpath(TRAINER, REPO)} into {run_dir} (about half a minute)",
          file=sys.stderr)
    subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", run_dir, TRAINER],
                   check=True, stdout=subprocess.DEVNULL)
    return run_dir


def _render(run_path: str, page: str, seam_label: str | None, layout: str) -> tuple[str, str | None]:
    import flowmap
    from flowmap.reporters.html import write_html

    run = flowmap.load(run_path)
    seams = list(run.seams.values())  # the page numbers seams s0, s1, ... in this order
    if seam_label is not None:
        labels = [s.label for s in seams]
        if seam_label not in labels:
            raise SystemExit(f"screenshot: no seam {seam_label!r} in {run_path}")
        index: int | None = labels.index(seam_label)
    else:
        index = max(range(len(seams)), key=lambda i: _richness(seams[i]) + (-i,), default=None)
    write_html(run.view, page, layout=layout)
    return page, None if index is None else f"s{index}"


def _richness(seam: object) -> tuple[int, int, int]:
    """Leaves with a dynamic dim, then leaves, then bytes: the seam whose details show the most."""
    leaves = seam.leaves  # type: ignore[attr-defined]
    dynamic = sum(1 for leaf in leaves if any(isinstance(d, list) for d in leaf.shape))
    return (dynamic, len(leaves), seam.total_bytes)  # type: ignore[attr-defined]


def _shoot(chromium: str, page: str, seam_id: str | None, out: str, width: int, height: int,
           profile: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    if os.path.exists(out):
        os.remove(out)  # so a failed shot cannot pass for a new one
    url = "file://" + os.path.abspath(page) + (f"#seam={seam_id}" if seam_id else "")
    cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={os.path.abspath(out)}",
           f"--window-size={width},{height}", "--hide-scrollbars", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not os.path.exists(out):
        raise SystemExit(f"screenshot: Chromium failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")


if __name__ == "__main__":
    sys.exit(main())
