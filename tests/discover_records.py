"""Hand-built discovery records (what one process writes), for folding and map tests.

A plain module (tests/ is on sys.path through its conftest), like `runs.py`:
records are written by hand so every figure in a test is one it chose.
"""

from __future__ import annotations

from typing import Any


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
