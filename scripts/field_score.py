"""Score the findings on the field corpus (examples/field/) and regenerate its table in docs/findings.md.

Each corpus script declares, at module level, what a user should be told:
`EXPECT = {"kind": ..., "seam": "src -> dst" (optional), "bytes_per_step": <hand
figure>, "values": True (optional: trace with --values)}`, or `EXPECT = None` for a
control (a bug with its fix applied: no finding may name it). Scripts without
`EXPECT` are not scored. A case passes when a finding of its kind names a seam
from `src` to `dst` with bytes at stake within ±50 % of the hand figure; a
control passes when it gets no finding but `heaviest` (traced both without and
with `--values`, so the value-reading detectors are tried on it too).

    .venv/bin/python scripts/field_score.py            # score all, rewrite the table
    .venv/bin/python scripts/field_score.py --check    # exit 1 if the table is stale
    .venv/bin/python scripts/field_score.py prefix_zmq chatty_fixed   # score these only
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIELD = ROOT / "examples" / "field"
DOC = ROOT / "docs" / "findings.md"
BEGIN, END = "<!-- field-score:begin -->", "<!-- field-score:end -->"
TOLERANCE = 0.5
IGNORED = ("heaviest",)  # a ranking of the seams, not a claim of waste
SAFE = {"sum": sum, "range": range, "len": len, "min": min, "max": max}
MISSING = object()


@dataclass
class Score:
    script: str
    expect: dict[str, Any] | None
    found: list[tuple[str, list[str], float]] = field(default_factory=list)
    error: str = ""

    @property
    def control(self) -> bool:
        return self.expect is None

    @property
    def passed(self) -> bool:
        if self.error:
            return False
        if self.expect is None:
            return not self.false_kinds
        return self.match is not None

    @property
    def match(self) -> tuple[str, list[str], float] | None:
        e = self.expect or {}
        for kind, seams, bps in self.found:
            if kind != e.get("kind"):
                continue
            if "seam" in e and not any(_route(s) == _route(e["seam"]) for s in seams):
                continue
            want = float(e["bytes_per_step"])
            if abs(bps - want) <= TOLERANCE * want:
                return kind, seams, bps
        return None

    @property
    def false_kinds(self) -> list[str]:
        return sorted({k for k, _, _ in self.found if k not in IGNORED})


def _route(label: str) -> str:
    """`trainer/rank0 -> b : name` -> `trainer -> b`: roles, as the findings group them."""
    ends = label.split(" : ", 1)[0].split(" -> ")
    return " -> ".join(e.strip().split("/", 1)[0] for e in ends)


def expectation(path: Path) -> Any:
    """The script's EXPECT, evaluated from its module-level constants; MISSING without one."""
    tree = ast.parse(path.read_text())
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if value is None:
                continue
            try:
                # one namespace: a generator expression's body looks its names up as globals
                got = eval(compile(ast.Expression(value), str(path), "eval"),  # noqa: S307
                           {**names, "__builtins__": SAFE})
            except Exception:
                continue
            for t in targets:
                if isinstance(t, ast.Name):
                    names[t.id] = got
                elif isinstance(t, ast.Tuple) and isinstance(got, tuple) \
                        and len(t.elts) == len(got):
                    for el, v in zip(t.elts, got):
                        if isinstance(el, ast.Name):
                            names[el.id] = v
    return names.get("EXPECT", MISSING)


def traced_findings(script: Path, values: bool, tmp: Path) -> list[tuple[str, list[str], float]]:
    run = tmp / f"{script.stem}{'-values' if values else ''}"
    cmd = [sys.executable, "-m", "flowmap", "trace", *(["--values"] if values else []),
           "-o", str(run), str(script)]
    proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
    code = ("import json, sys, flowmap\nfrom flowmap.findings import findings\n"
            "print(json.dumps([[f.kind, f.seams, f.bytes_per_step] "
            "for f in findings(flowmap.load(sys.argv[1]).view)]))")
    out = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    import json

    return [(k, s, float(b)) for k, s, b in json.loads(out)]


def score(script: Path, tmp: Path) -> Score:
    expect = expectation(script)
    s = Score(script.stem, expect)
    try:
        if expect is None:  # a control: neither with nor without values may it get a finding
            s.found = traced_findings(script, False, tmp) + traced_findings(script, True, tmp)
        else:
            s.found = traced_findings(script, bool(expect.get("values")), tmp)
    except Exception as exc:
        s.error = str(exc)
    return s


def corpus(only: list[str]) -> list[Path]:
    out = []
    for p in sorted(FIELD.glob("*.py")):
        if only and p.stem not in only:
            continue
        if expectation(p) is not MISSING:
            out.append(p)
    return out


def table(scores: list[Score]) -> str:
    cases: dict[str, list[Score]] = defaultdict(list)
    for s in scores:
        if s.expect is not None:
            cases[s.expect["kind"]].append(s)
    controls = [s for s in scores if s.control]
    falses: dict[str, list[str]] = defaultdict(list)
    for c in controls:
        for k in c.false_kinds:
            falses[k].append(c.script)
    lines = ["| detector | recall on its shapes | false findings on the controls |",
             "|---|---|---|"]
    for kind in sorted(set(cases) | set(falses)):
        got = cases.get(kind, [])
        hit = sum(s.passed for s in got)
        bad = falses.get(kind, [])
        lines.append(f"| `{kind}` | {hit}/{len(got)} | {len(bad)}/{len(controls)}"
                     + (f" ({', '.join(bad)})" if bad else "") + " |")
    lines += ["", "| script | expected | found | |", "|---|---|---|---|"]
    for s in scores:
        want = ("control: no finding" if s.expect is None else
                f"`{s.expect['kind']}` {s.expect.get('seam', '')} "
                f"{_fmt(float(s.expect['bytes_per_step']))}".replace("  ", " "))
        found = s.error or ", ".join(f"`{k}` {_fmt(b)}" for k, _, b in s.found
                                     if k not in IGNORED) or "none"
        lines.append(f"| `{s.script}.py` | {want} | {found} | {'pass' if s.passed else 'FAIL'} |")
    return "\n".join(lines) + "\n"


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    check = "--check" in sys.argv[1:]
    scripts = corpus(args)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        scores = list(pool.map(lambda p: score(p, Path(tmp)), scripts))
    for s in scores:
        print(f"{'pass' if s.passed else 'FAIL'}  {s.script}: "
              f"{s.error or [(k, round(b)) for k, _, b in s.found]}")
    if args:  # a subset scores, it does not rewrite the table
        return 0 if all(s.passed for s in scores) else 1
    doc = DOC.read_text()
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), doc, re.S)
    if m is None:
        print(f"docs/findings.md has no {BEGIN} ... {END} block")
        return 1
    new = doc[:m.start(1)] + table(scores) + doc[m.end(1):]
    if check:
        if new != doc:
            print("docs/findings.md's corpus table is stale: run scripts/field_score.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0 if all(s.passed for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
