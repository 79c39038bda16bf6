"""`flowmap report --json` of a fixed GRPO-shaped run matches its golden file.

The run is written by hand (fixed clocks, sizes and storage ids), so the whole
document is deterministic; any change to the report's content or layout shows
here as a diff. Regenerate with `pytest --update-golden` after a deliberate change.
"""

from __future__ import annotations

import json
import os

from runs import write_rl_run

import flowmap
from flowmap.reporters.json_document import report_document

GOLDEN = os.path.join(os.path.dirname(__file__), "test_report_golden.rl_run.json")


def test_report_json_matches_the_golden_file(tmp_path, golden):
    run = flowmap.load(write_rl_run(str(tmp_path / "run")))
    doc = report_document(run.view)
    doc["run"] = "RUN"
    golden.check(GOLDEN, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def test_report_json_is_byte_identical_across_loads(tmp_path):
    path = write_rl_run(str(tmp_path / "run"))
    first = json.dumps(report_document(flowmap.load(path).view), sort_keys=True)
    assert json.dumps(report_document(flowmap.load(path).view), sort_keys=True) == first
