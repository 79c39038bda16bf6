"""The identity corpus (examples/field/): relays, every-rank copies, views and messages never
received, through real transports, annotated only with `flowmap.owner` and `flowmap.step`,
each class with a control.

Each script states what it should get as `EXPECT` (kind, a seam, the bytes at stake per step
computed by hand from its sizes), or `EXPECT = None` for a control with the fix applied. The
test traces it in a fresh interpreter and checks its findings against that.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import flowmap
from flowmap.findings import findings

FIELD = Path(__file__).resolve().parents[2] / "examples" / "field"
# the findings these scripts exercise: identity, and message accounting
KINDS = ("pass_through", "duplicate", "view", "unreceived")
SCRIPTS = ["relay_mp_queue.py", "relay_pipe_chain.py", "relay_zmq_threads.py", "relay_fixed.py",
           "relay_shm_handles_fixed.py",
           "every_rank_queues.py", "every_rank_pipes.py", "every_rank_zmq.py",
           "every_rank_fixed.py", "view_pipe.py", "view_simple_queue.py", "view_zmq.py",
           "view_fixed.py", "unreceived_queue.py", "unreceived_pubsub.py", "unreceived_push.py",
           "unreceived_fixed.py"]


def expectation(script: Path) -> dict | None:
    """The script's `EXPECT`, read by running its module body (its `main` does not run)."""
    found = runpy.run_path(str(script), run_name="__field__")
    assert "EXPECT" in found, f"{script.name} states no EXPECT"
    return found["EXPECT"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_finding_is_the_hand_figure_and_controls_get_none(tmp_path: Path, name: str) -> None:
    script = FIELD / name
    text = script.read_text()
    assert "flowmap.hop(" not in text and "tag_items" not in text  # owner and step only
    expect = expectation(script)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", str(out), str(script)],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = [f for f in findings(flowmap.load(str(out)).view) if f.kind in KINDS]
    if expect is None:
        assert found == [], [f.message for f in found]
        return
    mine = [f for f in found if f.kind == expect["kind"]
            and any(s.startswith(expect["seam"] + " ") for s in f.seams)]
    assert mine, [(f.kind, f.seams) for f in found]
    # the judged bound (issue 37): the hand figure within ±50 %
    assert mine[0].bytes_per_step == pytest.approx(expect["bytes_per_step"], rel=0.5)
    assert not [f for f in found if f.kind != expect["kind"]], [f.message for f in found]
