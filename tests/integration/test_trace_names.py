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


def test_ctrl_c_shows_the_programs_frames_only(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import os, signal\n\ndef work():\n    os.kill(os.getpid(), signal.SIGINT)\n"
                      "    import time; time.sleep(5)\n\nwork()\n")
    r = subprocess.run([sys.executable, "-m", "flowmap", "trace", str(script)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert "KeyboardInterrupt" in r.stderr and 'slow.py", line 4, in work' in r.stderr
    for frame in ("cli/trace.py", "runpy", "flowmap/"):
        assert frame not in r.stderr.split("flowmap: run written")[0], r.stderr
