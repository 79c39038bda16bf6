"""Discovery records built by hand (folding and map tests), and the round-trip check.

A plain module (tests/ is on sys.path through its conftest), like `runs.py`:
records are written by hand so every figure in a test is one it chose.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import flowmap
from flowmap.seams import load_seam_map


def fn(key: str, *, calls: int = 2, call_bytes: int = 0, result_bytes: int = 0,
       args: Any = (), contexts: Any = (), delegated_to: dict[str, int] | None = None,
       target: bool = True, why_not: str | None = None) -> tuple[str, dict[str, Any]]:
    """One function's entry in a process record; `contexts` are (chain, n) with chain
    a list of (enclosing key, flags), innermost first."""
    module, qualname = key.split(":")
    return key, {
        "module": module, "qualname": qualname, "file": f"{module}.py", "line": 1,
        "argnames": list(args), "target": key if target else None, "why_not": why_not,
        "stats": {
            "calls": calls, "candidate_calls": calls if (call_bytes or result_bytes) else 0,
            "call_bytes": call_bytes, "result_bytes": result_bytes,
            "max_bytes": (call_bytes + result_bytes) // max(1, calls),
            "args": {a: calls for a in args}, "result_calls": calls if result_bytes else 0,
            "leaves": {}, "contexts": [[[list(a) for a in chain], n] for chain, n in contexts],
            "delegated_to": delegated_to or {},
        },
    }


def record(*fns: tuple[str, dict[str, Any]], steps: Any = (0, 1)) -> dict[str, Any]:
    """One process's record holding `fns`, having seen `steps`."""
    return {"pid": 1, "calls": 100, "steps": list(steps), "stop_reason": "",
            "functions": dict(fns)}


FIGURES = re.compile(r"# discovered: (\d+) calls; bytes per call ([\d.]+) in, ([\d.]+) out")


def discovered(path: Path) -> dict[str, tuple[int, float, float] | None]:
    """target -> (calls, bytes in per call, bytes out per call), from the map's comments."""
    out, figures = {}, None
    for line in path.read_text().splitlines():
        m = FIGURES.search(line)
        if m:
            figures = (int(m.group(1)), float(m.group(2)), float(m.group(3)))
        elif line.startswith("  - target:"):
            out[line.split(":", 1)[1].strip().strip('"')] = figures
    return out


def assert_round_trip(seam_map: Path, run_dir: Path) -> None:
    """Every seam of the map recorded what discovery saw: hops = calls, the same bytes per call."""
    run = flowmap.load(str(run_dir))
    figures = discovered(seam_map)
    for spec in load_seam_map(str(seam_map)).seams:
        calls, b_in, b_out = figures[spec.target]
        if spec.call:
            (key,) = [k for k in run.seams if k[1] == spec.owner and k[2] == spec.name]
            s = run.seams[key]
            assert s.hops == calls, spec.target
            assert s.total_bytes / s.hops == pytest.approx(b_in, abs=0.051), spec.target
        if spec.result:
            (key,) = [k for k in run.seams if k[0] == spec.owner and k[2] == spec.result_name]
            s = run.seams[key]
            assert s.hops == calls, spec.target
            assert s.total_bytes / s.hops == pytest.approx(b_out, abs=0.051), spec.target
