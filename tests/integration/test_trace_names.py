"""Two traces started at once get two runs (the run name is not 1-second wide)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_two_traces_in_the_same_second_get_two_runs(tmp_path):
    script = tmp_path / "x.py"
    script.write_text("import flowmap\nflowmap.hop('a', 'b', b'xx', name='x')\n")
    procs = [subprocess.Popen([sys.executable, "-m", "flowmap", "trace", str(script)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs = sorted(os.listdir(tmp_path / "flowmap-runs"))
    assert len(runs) == 2 and all(r.startswith("x-") for r in runs)
