"""Every output format renders the same CheckReport: JUnit parses, GitHub annotates, markdown tabulates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from flowmap.check.result import CheckReport, Result
from flowmap.errors import UsageError
from flowmap.reporters.check_formats import check_renderer, github

BATCH = "batcher -> trainer/rank0 : batch"


@pytest.fixture
def report() -> CheckReport:
    return sample_report()


def sample_report() -> CheckReport:
    return CheckReport(
        [
            Result("baseline", "a -> b : ok", "ok", "bytes/step 1.00 KiB -> 1.00 KiB (+0 %; ...)",
                   measured=1024, reference=1024, limit=1126, unit="B/step", check="bytes_per_step"),
            Result("baseline", BATCH, "fail", "bytes/step 1.50 KiB -> 2.00 KiB (+33 %; limit 1.65 KiB at 10 % tolerance)",
                   ["batch.advantages float32 -> float64, +100 %"],
                   measured=2048, reference=1536, limit=1690, unit="B/step", check="bytes_per_step"),
            Result("baseline", "x -> y : gone", "gone", "not in this run (baseline: 10 B/step)",
                   measured=0, reference=10, unit="B/step", check="bytes_per_step"),
            Result("budget", "counter staleness", "fail", "max = 3 (limit: max <= 2)",
                   measured=3, limit=2, check="max <= 2"),
            Result("budget", "items dropped", "ok", "1 of 8 items dropped (12 %; limit 15 %)",
                   measured=0.125, limit=0.15, check="max_dropped"),
        ],
        run="runs/r1", baseline="ci/base.json", budget="ci/budget.yaml", tolerance=0.1,
    )


def test_junit_parses_with_one_testcase_per_seam(report):
    root = ET.fromstring(check_renderer("junit")(report))
    assert root.tag == "testsuites" and root.get("tests") == "5" and root.get("failures") == "2"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    cases = {c.get("name"): c for c in suites["flowmap.baseline"].findall("testcase")}
    assert set(cases) == {"a -> b : ok", BATCH, "x -> y : gone"}
    failure = cases[BATCH].find("failure")
    assert failure is not None and "+33 %" in failure.get("message")
    assert "batch.advantages float32 -> float64, +100 %" in failure.text
    assert cases["x -> y : gone"].find("skipped") is not None
    budget_cases = [c.get("name") for c in suites["flowmap.budget"].findall("testcase")]
    assert budget_cases == ["counter staleness: max <= 2", "items dropped: max_dropped"]


def test_github_emits_error_annotations_with_escaped_properties(report):
    out = check_renderer("github")(report)
    lines = out.splitlines()
    errors = [x for x in lines if x.startswith("::error ")]
    assert len(errors) == 2
    assert errors[0] == (
        "::error file=ci/base.json,title=flowmap%3A batcher -> trainer/rank0 %3A batch::"
        "bytes/step 1.50 KiB -> 2.00 KiB (+33 %25; limit 1.65 KiB at 10 %25 tolerance)"
        "%0Abatch.advantages float32 -> float64, +100 %25"
    )
    assert errors[1].startswith("::error file=ci/budget.yaml,title=flowmap%3A counter staleness%3A max <= 2::")
    assert any(x.startswith("::notice ") and "gone" in x for x in lines)
    assert lines[-1] == "flowmap check FAILED: 2 regressions, 1 gone seam, 2 within limits"


def test_step_summary_is_appended(report, tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("earlier step\n")
    md = check_renderer("markdown")(report)
    assert github.append_step_summary(md, {"GITHUB_STEP_SUMMARY": str(path)})
    assert path.read_text().startswith("earlier step\n### ❌ flowmap check FAILED")
    assert not github.append_step_summary(md, {})


def test_markdown_is_a_pr_comment_table(report):
    md = check_renderer("markdown")(report)
    assert "| | Seam | Baseline | This run | Change | Limit |" in md
    assert f"| ❌ | `{BATCH}` | 1.50 KiB/step | 2.00 KiB/step | +33 % | 1.65 KiB/step |" in md
    assert "| ✅ | `items dropped` | `max_dropped` | 12.5 % | 1 of 8 items dropped (12 %; limit 15 %) |" in md
    assert "  - `batch.advantages float32 -> float64, +100 %`" in md
    # failures come first
    assert md.index(BATCH) < md.index("a -> b : ok")


def test_json_document(report):
    doc = json.loads(check_renderer("json")(report))
    assert doc["flowmap"] == "check" and doc["passed"] is False
    assert doc["counts"]["fail"] == 2
    assert doc["results"][0]["subject"] == BATCH
    assert doc["results"][0]["details"] == ["batch.advantages float32 -> float64, +100 %"]


def test_text_ends_with_the_verdict(report):
    text = check_renderer("text")(report)
    assert text.splitlines()[0] == "flowmap check: run runs/r1, baseline ci/base.json (tolerance 10 %), budget ci/budget.yaml"
    assert "FAIL    batcher -> trainer/rank0 : batch" in text
    assert "        - batch.advantages float32 -> float64, +100 %" in text
    assert text.splitlines()[-1] == "flowmap check FAILED: 2 regressions, 1 gone seam, 2 within limits"


def _render_in_a_fresh_process(hash_seed: str) -> str:
    """Every check format of `sample_report()`, rendered by a new interpreter with this hash seed."""
    code = (
        "import json, runpy, sys\n"
        "from flowmap.reporters.check_formats import CHECK_FORMATS, check_renderer\n"
        "report = runpy.run_path(sys.argv[1])['sample_report']()\n"
        "sys.stdout.write(json.dumps({f: check_renderer(f)(report) for f in CHECK_FORMATS}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["PYTHONHASHSEED"] = hash_seed
    done = subprocess.run([sys.executable, "-c", code, __file__], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_renderers_are_deterministic():
    """Two interpreters with different string hashes write the same bytes in every format.

    One process rendering twice would hide an order taken from a set or a hash.
    """
    first, second = _render_in_a_fresh_process("1"), _render_in_a_fresh_process("2")
    assert set(json.loads(first)) == {"text", "markdown", "json", "junit", "github"}
    assert first == second


def test_unknown_format_is_a_usage_error():
    with pytest.raises(UsageError, match="choose one of text, markdown, json, junit, github"):
        check_renderer("html")
