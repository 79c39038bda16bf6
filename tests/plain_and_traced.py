"""Run one program plainly and under `flowmap trace`, to compare what the program saw.

For the transport tests: a failure (timeout, closed socket, broken pipe) must
reach a traced program exactly as it reaches an untraced one. The program's
body calls `outcome(fn)` for each case and prints `out` as JSON at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import flowmap

PRELUDE = '''
import json

def outcome(fn):
    try:
        fn()
        return "ok"
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"

out = {}
'''


def run_both(tmp_path: Any, run_cli: Any, body: str) -> tuple[dict, dict, Any]:
    """(outcomes untraced, outcomes traced, the traced run) of `PRELUDE + body`."""
    script = tmp_path / "outcomes.py"
    script.write_text(PRELUDE + body + "\nprint(json.dumps(out))\n")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    traced = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert traced.returncode == 0, traced.stderr[-2000:]
    return json.loads(plain.stdout), json.loads(traced.stdout), flowmap.load(str(tmp_path / "run"))
