"""The report of the built-in trainer's run as a CI log shows it: piped, 80 columns (slow).

One traced run of `examples/grpo_tiny.py` (the gate's short run) serves every
test: the report fits 80 columns in at most 150 lines with the findings on the
first screen, every figure reads in one unit family with no e-notation, each
finding's figure is the one its message gives, and docs/trainer.md lists the
`env_reply` fields the trainer really sends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len

import flowmap
from flowmap.model.format import fmt_per_step

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINER = os.path.join(ROOT, "examples", "grpo_tiny.py")
SCREEN = 24  # rows of a default terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(TRAINER), reason="needs examples/grpo_tiny.py"),
]


def _flowmap(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([sys.executable, "-m", "flowmap", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("trainer") / "run")
    # trained in float64, so that the report has a finding to lay out (as it ships, in float32,
    # the built-in trainer has none: docs/findings.md)
    r = _flowmap("trace", "-o", path, TRAINER, "--steps", "4", "--seed", "0", "--no-progress",
                 "--set", "train.dtype=float64")
    assert r.returncode == 0, r.stderr[-3000:]
    return path


def test_the_piped_report_fits_80_columns_and_leads_with_the_findings(run_dir):
    r = _flowmap("report", run_dir)  # stdout is a pipe, as in every CI log
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 150
    assert max(cell_len(ln) for ln in lines) <= 80
    findings = next(i for i, ln in enumerate(lines) if ln.startswith("Findings"))
    assert findings + 2 < SCREEN  # the heading and the first finding are on the first screen
    assert findings < next(i for i, ln in enumerate(lines) if ln.startswith("Seams"))


def test_figures_read_in_one_unit_family_without_e_notation(run_dir):
    text = _flowmap("report", "--all", "--width", "120", run_dir).stdout
    assert not re.search(r"\d(?:\.\d+)?e[+-]\d", text)
    assert not re.search(r"\b(?:nan|inf)\b", text, re.IGNORECASE)
    assert not re.search(r"\d (?:kB|MB|GB)\b", text)  # sizes are KiB/MiB/GiB, beside .../step too
    assert not re.search(r"\b1 hops\b", text)


def test_each_findings_figure_is_the_one_its_message_gives(run_dir):
    doc = json.loads(_flowmap("report", "--json", run_dir).stdout)
    assert doc["findings"]
    for f in doc["findings"]:
        if f["bytes_per_step"]:
            assert fmt_per_step(f["bytes_per_step"]) in f["message"], f


def test_docs_list_the_env_reply_fields_the_trainer_sends(run_dir):
    view = flowmap.load(run_dir).view
    sent = {leaf.path.split("[")[0].split(".")[0] for key, s in view.seams.items()
            if key[2] == "env_reply" for leaf in s.leaves}
    with open(os.path.join(ROOT, "docs", "trainer.md"), encoding="utf-8") as f:
        row = next(ln for ln in f if "`env -> rollout/i : env_reply`" in ln)
    documented = set(re.search(r"`\{([^}]*)\}`", row).group(1).replace(" ", "").split(","))
    assert sent and documented == sent
