"""`flowmap report --json` of a fixed GRPO-shaped run matches its golden file.

The run is written by hand (fixed clocks, sizes and storage ids), so the whole
document is deterministic; any change to the report's content or layout shows
here as a diff. Regenerate with FLOWMAP_UPDATE_GOLDEN=1 after a deliberate change.
"""

from __future__ import annotations

import json
import os

from runs import write_rl_run

import flowmap
from flowmap.report.document import report_document

GOLDEN = os.path.join(os.path.dirname(__file__), "test_report_golden.rl_run.json")


def test_report_json_matches_the_golden_file(tmp_path):
    run = flowmap.load(write_rl_run(str(tmp_path / "run")))
    doc = report_document(run)
    doc["run"] = "RUN"
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if os.environ.get("FLOWMAP_UPDATE_GOLDEN"):
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write(text)
    with open(GOLDEN, encoding="utf-8") as f:
        assert text == f.read()


def test_report_json_is_byte_identical_across_loads(tmp_path):
    path = write_rl_run(str(tmp_path / "run"))
    first = json.dumps(report_document(flowmap.load(path)), sort_keys=True)
    assert json.dumps(report_document(flowmap.load(path)), sort_keys=True) == first
