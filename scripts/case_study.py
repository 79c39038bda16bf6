"""Regenerate the DSA R3 case study's figures and numbers from two real traced runs.

    python scripts/case_study.py                  # trace both transports (~30 s), then draw
    python scripts/case_study.py --runs DIR       # reuse DIR/payload and DIR/handle
    python scripts/case_study.py --docs           # regenerate docs/images/ (tracked)

Traces `examples/dsa_r3.py --transport payload` and `--transport handle` with
the same seed (synchronous, so the runs differ only in the transport) into
`flowmap-runs/dsa-r3/` (git-ignored), then reads them with the flowmap CLI
(`report --json`, `diff -f json`, `render`), always projected to
DeepSeek-V3.2 at 32K tokens, and writes into out/case-study/ (git-ignored;
`--docs` writes docs/images/ instead, the tracked figures):

    dsa-r3-payload.{svg,png}   the payload run's dataflow graph (the naive seam)
    dsa-r3-handle.{svg,png}    the handle run's graph (the store beside the control path)
    dsa-r3-diff.{svg,png}      bytes per step of each seam, payload vs handle, log scale
    dsa-r3-store.{svg,png}     replay-store entries alive over the handle run (lifetime)
    dsa-r3-numbers.json        every figure the case study quotes
    dsa-r3-tables.md           the tables of docs/case-study-dsa-r3.md, ready to paste

The graphs need Graphviz's `dot`; the PNGs of the two charts need Chromium
(`$FLOWMAP_CHROMIUM` or on PATH) and are skipped with a note without it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(REPO, "docs", "images")  # where --docs writes: tracked
OUT = os.path.join(REPO, "out", "case-study")  # the default: git-ignored
EXAMPLE = os.path.join("examples", "dsa_r3.py")
PRESET = "deepseek-v3.2@32k"
TRANSPORTS = ("payload", "handle")
# Seams shown in the diff chart, by role; the control path first, then the store's data path.
CHART_SEAMS = (
    "rollout -> env : turn",
    "rollout -> weight_sync : paused",
    "rollout -> ready_buffer : trajectory",
    "ready_buffer -> batcher : samples",
    "batcher -> reward : rollout_batch",
    "batcher -> trainer : micro_batch",
    "rollout -> replay_store : replay",
    "replay_store -> trainer : replay",
)
# The control-path seams that carry the replay arrays with the payload transport.
CONTROL_SEAMS = CHART_SEAMS[:6]
COLOURS = {"payload": "#b2182b", "handle": "#2166ac"}
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--hide-scrollbars")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", help="directory holding payload/ and handle/ runs (default: trace now)")
    p.add_argument("--out", default=None, help="where figures go (default: out/case-study, git-ignored)")
    p.add_argument("--docs", action="store_true", help="write into docs/images (the tracked figures)")
    args = p.parse_args(argv)
    args.out = os.path.abspath(args.out or (IMAGES if args.docs else OUT))
    os.chdir(REPO)
    os.makedirs(args.out, exist_ok=True)
    runs, walls, stdout = _runs(args.runs)
    reports = {t: _cli_json("report", runs[t], "--project", PRESET, "--json") for t in TRANSPORTS}
    traced = {t: _cli_json("report", runs[t], "--json") for t in TRANSPORTS}
    diff = _cli_json("diff", runs["payload"], runs["handle"], "--project", PRESET, "-f", "json")
    numbers = _numbers(runs, reports, traced, diff, walls, stdout)
    for t in TRANSPORTS:
        base = os.path.join(args.out, f"dsa-r3-{t}")
        _cli("render", runs[t], "--project", PRESET, "--svg", base + ".svg", "--png", base + ".png")
    charts = {"diff": _diff_chart(numbers), "store": _store_chart(traced["handle"])}
    for name, (svg, width, height) in charts.items():
        path = os.path.join(args.out, f"dsa-r3-{name}.svg")
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
        _png(path, width, height)
    with open(os.path.join(args.out, "dsa-r3-numbers.json"), "w", encoding="utf-8") as f:
        json.dump(numbers, f, indent=2, sort_keys=True)
        f.write("\n")
    tables = _tables(numbers)
    with open(os.path.join(args.out, "dsa-r3-tables.md"), "w", encoding="utf-8") as f:
        f.write(tables)
    print(tables)
    return 0


# -- the runs --------------------------------------------------------------------------


def _runs(given: str | None) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    if given:
        return {t: os.path.join(given, t) for t in TRANSPORTS}, {}, {}
    root = os.path.join("flowmap-runs", "dsa-r3")  # git-ignored; kept for a look
    runs, walls, stdout = {}, {}, {}
    for t in TRANSPORTS:
        runs[t] = os.path.join(root, t)
        shutil.rmtree(runs[t], ignore_errors=True)
        print(f"case_study: tracing {EXAMPLE} --transport {t}", file=sys.stderr)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", runs[t], EXAMPLE,
                            "--transport", t, "--no-progress"],
                           check=True, capture_output=True, text=True)
        walls[t], stdout[t] = round(time.monotonic() - t0, 1), r.stdout
    return runs, walls, stdout


def _cli(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "flowmap", *args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"case_study: flowmap {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def _cli_json(*args: str) -> dict[str, Any]:
    return json.loads(_cli(*args))


# -- numbers ---------------------------------------------------------------------------


def _role(owner: str) -> str:
    return owner.split("/", 1)[0]


def _role_label(seam: dict[str, Any]) -> str:
    return f"{_role(seam['src'])} -> {_role(seam['dst'])} : {seam['name']}"


def _by_role(report: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for s in report["seams"]:
        out[_role_label(s)] += s["bytes_per_step"]
    return dict(out)


def _numbers(runs: dict[str, str], reports: dict[str, Any], traced: dict[str, Any],
             diff: dict[str, Any], walls: dict[str, float], stdout: dict[str, str]
             ) -> dict[str, Any]:
    import flowmap
    from flowmap.model.projection import project

    per_sample: dict[str, dict[str, float]] = {}
    handle_bytes: list[float] = []
    for t in TRANSPORTS:
        run = flowmap.load(runs[t])
        projected = project(run, PRESET)
        sizes: dict[str, list[float]] = defaultdict(list)
        for h in projected.hops:
            if h.name == "trajectory" and h.items:
                for leaf in h.leaves:
                    if leaf.path in ("[*].indexer_topk", "[*].routed_experts"):
                        sizes[leaf.path].append(leaf.nbytes / len(h.items))
        per_sample[t] = {k: sum(v) / len(v) for k, v in sizes.items()}
        if t == "handle":
            handle_bytes = [sum(x.nbytes for x in h.leaves if "replay_handle" in x.path)
                            / len(h.items) for h in run.hops if h.name == "trajectory"]
    toy = {}
    for s in traced["payload"]["seams"]:
        if s["name"] == "trajectory":
            for leaf in s["leaves"]:
                if leaf["path"] in ("[*].indexer_topk", "[*].routed_experts"):
                    toy[leaf["path"]] = {"shape": leaf["shape"], "bytes_per_hop": leaf["bytes"]}
    losses = {t: [v for _, v in reports[t]["counters"]["loss"]["series"]] for t in TRANSPORTS}
    seams = {t: _by_role(reports[t]) for t in TRANSPORTS}
    control = {t: sum(seams[t].get(k, 0.0) for k in CONTROL_SEAMS) for t in TRANSPORTS}
    # Resend cost, in traced bytes: every turn ships the rows of its whole context again.
    indexer = {name: sum(leaf["total_bytes"] for s in traced["payload"]["seams"]
                         if s["name"] == name for leaf in s["leaves"]
                         if leaf["path"].endswith("indexer_topk"))
               for name in ("turn", "trajectory")}
    store = traced["handle"]["counters"].get("replay_store_entries", {})
    residency = [s["residency_mean_s"] for s in traced["handle"]["seams"]
                 if s["dst"] == "replay_store" and s["residency_mean_s"] is not None]
    return {
        "preset": PRESET,
        "projection_note": reports["payload"]["projection"]["note"],
        "runs": runs,
        "wall_s": walls,
        "summary": {t: [line for line in stdout.get(t, "").splitlines()
                        if line.startswith("dsa_r3")] for t in TRANSPORTS},
        "steps": reports["payload"]["steps"],
        "losses": losses,
        "losses_identical": losses["payload"] == losses["handle"],
        "toy_trajectory_leaves": toy,
        "projected_per_leaf_trajectory": per_sample["payload"],
        "handle_bytes_per_leaf_trajectory": {
            "mean": sum(handle_bytes) / max(1, len(handle_bytes)),
            "max": max(handle_bytes, default=0.0)},
        "seams_bytes_per_step": seams,
        "control_path_bytes_per_step": control,
        "traced_indexer_bytes": indexer,
        "turn_rows_per_trajectory_row": indexer["turn"] / max(1, indexer["trajectory"]),
        "total_bytes_per_step": {t: sum(seams[t].values()) for t in TRANSPORTS},
        "top_finding": {t: reports[t]["findings"][0] for t in TRANSPORTS},
        "findings": {t: reports[t]["findings"][:5] for t in TRANSPORTS},
        "store": {"entries_max": store.get("max"), "entries_last": store.get("last"),
                  "residency_mean_s": sum(residency) / len(residency) if residency else None,
                  "items": traced["handle"]["items"]},
        "diff": [{k: s[k] for k in ("seam", "a_bytes_per_step", "b_bytes_per_step", "status")}
                 for s in diff["seams"][:12]],
    }


# -- charts ----------------------------------------------------------------------------


def _fmt(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _diff_chart(numbers: dict[str, Any]) -> tuple[str, int, int]:
    """Horizontal bars, two per seam (payload, handle), on a log scale of bytes per step."""
    seams = numbers["seams_bytes_per_step"]
    left, right, top, row, bar = 300, 140, 70, 46, 16
    width, lo, hi = 1100, 2**10, 2**42  # 1 KiB .. 4 TiB
    height = top + row * len(CHART_SEAMS) + 60
    span = width - left - right

    def x(v: float) -> float:
        return left + span * (math.log2(max(v, lo)) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="16" y="24" font-size="15" font-weight="bold">Bytes per training step, '
           f'payload vs handle — PROJECTION to {PRESET}</text>',
           '<text x="16" y="44" fill="#555">log scale; each seam summed over its instances '
           '(2 engines, 2 DP ranks); from two traced runs of examples/dsa_r3.py</text>']
    for p in range(10, 43, 4):
        gx = x(2**p)
        out.append(f'<line x1="{gx:.1f}" y1="{top - 6}" x2="{gx:.1f}" y2="{height - 50}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{gx:.1f}" y="{height - 34}" text-anchor="middle" fill="#555">'
                   f'{_fmt(2**p)}</text>')
    for i, label in enumerate(CHART_SEAMS):
        y = top + i * row
        out.append(f'<text x="{left - 10}" y="{y + bar + 4}" text-anchor="end">{_esc(label)}</text>')
        for j, t in enumerate(TRANSPORTS):
            v = seams[t].get(label, 0.0)
            yy = y + j * (bar + 2)
            w = x(v) - left if v else 0
            out.append(f'<rect x="{left}" y="{yy}" width="{w:.1f}" height="{bar}" '
                       f'fill="{COLOURS[t]}"/>')
            text = _fmt(v) if v else "— (no such seam)"
            out.append(f'<text x="{left + w + 6:.1f}" y="{yy + bar - 3}" font-size="12" '
                       f'fill="{COLOURS[t]}">{t}: {text}</text>')
    out.append("</svg>\n")
    return "\n".join(out), width, height


def _store_chart(handle: dict[str, Any]) -> tuple[str, int, int]:
    """Replay-store entries alive over the handle run: filled at registration, freed per step."""
    raw = handle["counters"].get("replay_store_entries", {}).get("series", [])
    t0 = raw[0][0] if raw else 0.0  # from the first entry: the warm-up before it is not shown
    series = [(t - t0, v) for t, v in raw]
    width, height, left, bottom, top = 1000, 360, 70, 50, 60
    t_max = max((t for t, _ in series), default=1.0) or 1.0
    v_max = max((v for _, v in series), default=1.0) or 1.0

    def xy(t: float, v: float) -> str:
        return (f"{left + (width - left - 20) * t / t_max:.1f},"
                f"{height - bottom - (height - bottom - top) * v / v_max:.1f}")

    points, last = [], 0.0
    for t, v in series:  # a step line: the count holds until the next sample
        points += [xy(t, last), xy(t, v)]
        last = v
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           '<text x="16" y="24" font-size="15" font-weight="bold">Replay store: entries alive '
           'during the handle run (counter replay_store_entries)</text>',
           '<text x="16" y="44" fill="#555">one entry per leaf trajectory, put when it is '
           'registered, freed once every rank has reported the step that trained it, when it '
           'is dropped, or at close</text>',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - 20}" y2="{height - bottom}" '
           'stroke="#888"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#888"/>',
           f'<text x="{left - 8}" y="{top + 4}" text-anchor="end">{v_max:.0f}</text>',
           f'<text x="{left - 8}" y="{height - bottom + 4}" text-anchor="end">0</text>',
           f'<text x="{width - 20}" y="{height - bottom + 20}" text-anchor="end">'
           f'{t_max:.1f} s</text>',
           f'<text x="{left}" y="{height - bottom + 20}">0 s (the first entry)</text>',
           f'<polyline fill="none" stroke="{COLOURS["handle"]}" stroke-width="2" '
           f'points="{" ".join(points)}"/>',
           "</svg>\n"]
    return "\n".join(out), width, height


def _png(svg_path: str, width: int, height: int) -> None:
    """Shoot the SVG with headless Chromium (as scripts/screenshot.py does the HTML view)."""
    env = os.environ.get("FLOWMAP_CHROMIUM")
    names = (env,) if env else ("chromium", "chromium-browser", "google-chrome")
    chromium = next((p for p in map(shutil.which, filter(None, names)) if p), None)
    png = svg_path[: -len(".svg")] + ".png"
    if chromium is None:
        print(f"case_study: no Chromium, {os.path.basename(png)} not written", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory(prefix="flowmap-shot-") as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
               f"--screenshot={os.path.abspath(png)}", f"--window-size={width},{height}",
               "file://" + os.path.abspath(svg_path)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode or not os.path.exists(png):
        raise SystemExit(f"case_study: Chromium failed on {svg_path}: {r.stderr.strip()[-300:]}")


# -- tables ----------------------------------------------------------------------------


def _tables(n: dict[str, Any]) -> str:
    seams = n["seams_bytes_per_step"]
    rows = ["| seam (roles) | payload | handle |", "|---|---:|---:|"]
    for label in CHART_SEAMS:
        p, h = seams["payload"].get(label), seams["handle"].get(label)
        rows.append(f"| `{label}` | {_fmt(p) if p else '—'} | {_fmt(h) if h else '—'} |")
    cp, ch = n["control_path_bytes_per_step"]["payload"], n["control_path_bytes_per_step"]["handle"]
    tp, th = n["total_bytes_per_step"]["payload"], n["total_bytes_per_step"]["handle"]
    rows.append(f"| **control path** (the six seams above) | **{_fmt(cp)}** | "
                f"**{_fmt(ch)}** |")
    rows.append(f"| all seams | {_fmt(tp)} | {_fmt(th)} |")
    per = n["projected_per_leaf_trajectory"]
    hb = n["handle_bytes_per_leaf_trajectory"]
    facts = [
        "",
        f"- projected `indexer_topk` per leaf trajectory: "
        f"{per.get('[*].indexer_topk', 0):,.0f} B; `routed_experts`: "
        f"{per.get('[*].routed_experts', 0):,.0f} B",
        f"- `replay_handle` per leaf trajectory (traced, not projected): mean "
        f"{hb['mean']:.0f} B, max {hb['max']:.0f} B",
        f"- resend: the turns carried {n['turn_rows_per_trajectory_row']:.2f}x the "
        "`indexer_topk` bytes the finished trajectories did (traced bytes)",
        f"- losses identical between the transports: {n['losses_identical']} "
        f"({len(n['losses']['payload'])} steps)",
        f"- top finding, payload: {n['top_finding']['payload']['kind']}, "
        f"{_fmt(n['top_finding']['payload']['bytes_per_step'])}/step",
        f"- top finding, handle: {n['top_finding']['handle']['kind']}, "
        f"{_fmt(n['top_finding']['handle']['bytes_per_step'])}/step",
    ]
    return "\n".join(rows + facts) + "\n"


if __name__ == "__main__":
    sys.exit(main())
