"""`flowmap baseline / check / diff` on real traced runs, driven as a user (and CI) would.

Runs are small scripts of `flowmap.hop` under `flowmap.tracing`, with numpy
arrays as payloads; each done-when case of issue 5 grows the payload one way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import flowmap
from flowmap.cli.main import main

BATCH = "batcher -> trainer/rank0 : batch"


def cli(args, cwd=None) -> subprocess.CompletedProcess[str]:
    """`flowmap ARGS` in a fresh interpreter, as a user or a CI job runs it."""
    return subprocess.run([sys.executable, "-m", "flowmap", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def make_run(path, *, adv_dtype="float32", seq_len=64, routed_experts=False, replay_seam=False,
             steps=3) -> str:
    """A toy pipeline: trajectories into a ready buffer, a batch to the trainer, per step."""
    with flowmap.tracing(str(path)):
        for s in range(steps):
            flowmap.step(s)
            for engine in (0, 1):
                flowmap.hop(f"rollout/{engine}", "ready_buffer",
                            {"tokens": np.zeros(seq_len, np.int64), "logprobs": np.zeros(seq_len, np.float32)},
                            name="trajectory", items=[f"{s}-{engine}"])
            batch = {
                "input_ids": np.zeros((8, seq_len), np.int64),
                "advantages": np.zeros((8, seq_len), adv_dtype),
            }
            if routed_experts:
                batch["routed_experts"] = np.zeros((8, seq_len, 2, 2), np.int32)
            flowmap.hop("batcher", "trainer/rank0", batch, name="batch",
                        dims={"input_ids": ("B", "T"), "advantages": ("B", "T")})
            if replay_seam:
                flowmap.hop("rollout/0", "trainer/rank0", np.zeros((8, seq_len, 4), np.int32), name="replay")
            flowmap.counter("staleness", s % 2)
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    return {
        "base": make_run(d / "base"),
        "same": make_run(d / "same"),
        "float64": make_run(d / "float64", adv_dtype="float64"),
        "added_leaf": make_run(d / "added_leaf", routed_experts=True),
        "doubled": make_run(d / "doubled", seq_len=128),
        "new_seam": make_run(d / "new_seam", replay_seam=True),
        "smaller": make_run(d / "smaller", seq_len=32),
    }


@pytest.fixture(scope="module")
def baseline(runs, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ci") / "flowmap-baseline.json")
    assert main(["baseline", runs["base"], "-o", path]) == 0
    return path


def check(capsys, *args):
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_check_passes_on_the_run_the_baseline_came_from(runs, baseline, capsys):
    code, out, err = check(capsys, runs["base"], "--baseline", baseline)
    assert code == 0, out + err
    assert out.splitlines()[-1] == "flowmap check passed: 3 within limits"


def test_check_passes_on_a_rerun_of_the_same_program(runs, baseline, capsys):
    code, out, _ = check(capsys, runs["same"], "--baseline", baseline)
    assert code == 0, out


@pytest.mark.parametrize(
    ("run", "leaf_text"),
    [
        ("float64", "batch.advantages float32 -> float64, +100 %"),
        ("added_leaf", "batch.routed_experts added: int32 [8, 64, 2, 2], 8.00 KiB/hop"),
        ("doubled", "batch.input_ids [B=8, T=64] -> [B=8, T=128], +100 %"),
    ],
)
def test_check_fails_naming_seam_and_leaf(runs, baseline, capsys, run, leaf_text):
    code, out, _ = check(capsys, runs[run], "--baseline", baseline)
    assert code == 1
    assert f"FAIL    {BATCH}" in out
    assert f"        - {leaf_text}" in out
    assert out.splitlines()[-1].startswith("flowmap check FAILED: ")


def test_check_fails_on_a_new_seam(runs, baseline, capsys):
    code, out, _ = check(capsys, runs["new_seam"], "--baseline", baseline)
    assert code == 1
    assert "FAIL    rollout/0 -> trainer/rank0 : replay" in out
    assert "new seam carrying 8.00 KiB/step (at or above the 1.00 KiB/step floor)" in out
    assert "- replay added: int32 [8, 64, 4], 8.00 KiB/hop" in out
    # the floor is configurable
    code, _, _ = check(capsys, runs["new_seam"], "--baseline", baseline, "--min-bytes", "16 KiB")
    assert code == 0


def test_improvement_and_gone_seam_are_reported_not_failed(runs, baseline, capsys):
    code, out, _ = check(capsys, runs["smaller"], "--baseline", baseline)
    assert code == 0
    assert f"better  {BATCH}" in out
    assert "batch.input_ids [B=8, T=64] -> [B=8, T=32], -50 %" in out
    path = os.path.join(os.path.dirname(baseline), "with_replay.json")
    assert main(["baseline", runs["new_seam"], "-o", path]) == 0
    code, out, _ = check(capsys, runs["base"], "--baseline", path)
    assert code == 0
    assert "gone    rollout/0 -> trainer/rank0 : replay" in out


def test_tolerance_absorbs_growth(runs, baseline, capsys):
    # the added routed_experts array fails at any tolerance: new arrays always count
    code, _, _ = check(capsys, runs["added_leaf"], "--baseline", baseline, "--tolerance", "500%")
    assert code == 1
    # a grown dimension passes once the tolerance covers it
    code, _, _ = check(capsys, runs["doubled"], "--baseline", baseline, "--tolerance", "150%")
    assert code == 0


@pytest.mark.parametrize("tolerance", ["ten", "10", "-5%", "5%%"])
def test_bad_tolerance_exits_2_with_one_line(runs, baseline, capsys, tolerance):
    code, out, err = check(capsys, runs["base"], "--baseline", baseline, "--tolerance", tolerance)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("flowmap: ") and "--tolerance" in err


def test_bad_size_exits_2_with_one_line(runs, baseline, capsys):
    code, _, err = check(capsys, runs["base"], "--baseline", baseline, "--min-bytes", "lots")
    assert code == 2
    assert err == "flowmap: --min-bytes: cannot read 'lots' as a size; write it like '64 KB', '2 MiB' or 1024\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "not found; record one with `flowmap baseline RUN -o"),
        ("{oops", "is not valid JSON"),
        ('{"name": "package.json"}', "is not a flowmap baseline"),
        (b"\x00\xff\xfe", "cannot read the baseline"),
    ],
)
def test_unreadable_or_foreign_baseline_exits_2(runs, tmp_path, capsys, content, message):
    path = tmp_path / "b.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    code, out, err = check(capsys, runs["base"], "--baseline", str(path))
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err


def test_budget_with_unknown_key_exits_2_naming_key_and_line(runs, baseline, tmp_path, capsys):
    budget = tmp_path / "budget.yaml"
    budget.write_text("seams:\n  rollout -> ready_buffer:\n    max_bytes_per_hop: 64 KB\n    max_byte_per_step: 1 MB\n")
    code, out, err = check(capsys, runs["base"], "--baseline", baseline, "--budget", str(budget))
    assert code == 2
    assert err == (f"flowmap: {budget} line 4: unknown key 'max_byte_per_step' under seam "
                   "'rollout -> ready_buffer'; expected one of max_bytes_per_hop, max_bytes_per_step, "
                   "max_hops_per_step, tolerance\n")


def test_budget_alone_gates(runs, tmp_path, capsys):
    budget = tmp_path / "budget.yaml"
    budget.write_text(
        "seams:\n  rollout/* -> ready_buffer:\n    max_bytes_per_hop: 1 KB\n"
        "counters:\n  - staleness.max <= 1\n"
        "total:\n  max_bytes_per_step: 1 MB\n"
    )
    code, out, _ = check(capsys, runs["base"], "--budget", str(budget))
    assert code == 0, out
    code, out, _ = check(capsys, runs["doubled"], "--budget", str(budget))
    assert code == 1
    assert "rollout/0 -> ready_buffer : trajectory: max_bytes_per_hop" in out
    assert "was limited to 1 KB (1000 B) per hop but carried 1.50 KiB" in out


def test_budget_tolerance_overrides_for_matched_seams(runs, baseline, tmp_path, capsys):
    # GIVEN a doubled sequence length: the batch and both trajectory seams grow +100 %
    budget = tmp_path / "budget.yaml"
    budget.write_text('seams:\n  "rollout -> ready_buffer":\n    tolerance: 150 %\n')
    code, out, _ = check(capsys, runs["doubled"], "--baseline", baseline, "--budget", str(budget))
    # THEN only the batch fails: the trajectory seams have their own, wider tolerance
    assert code == 1
    assert f"FAIL    {BATCH}" in out
    assert ("ok      rollout/0 -> ready_buffer : trajectory: bytes/step 768 B -> 1.50 KiB "
            "(+100 %; limit 1.88 KiB, tolerance 150 %)") in out


def test_nothing_to_check_is_a_usage_error(runs, capsys):
    code, _, err = check(capsys, runs["base"])
    assert code == 2 and "give --baseline FILE and/or --budget FILE" in err


def test_junit_output_parses(runs, baseline, capsys):
    code, out, _ = check(capsys, runs["float64"], "--baseline", baseline, "--format", "junit")
    assert code == 1
    root = ET.fromstring(out)
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert len(cases) == 3
    assert cases[BATCH].find("failure") is not None
    assert "float32 -> float64" in cases[BATCH].find("failure").text


def test_github_format_emits_errors_and_step_summary(runs, baseline, tmp_path, capsys, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = check(capsys, runs["float64"], "--baseline", baseline, "--format", "github")
    assert code == 1
    errors = [x for x in out.splitlines() if x.startswith("::error ")]
    assert len(errors) == 1
    assert "title=flowmap%3A batcher -> trainer/rank0 %3A batch::" in errors[0]
    assert "batch.advantages float32 -> float64, +100 %25" in errors[0]
    assert "| ❌ | `batcher -> trainer/rank0 : batch` |" in summary.read_text()


def test_json_and_markdown_formats(runs, baseline, capsys):
    code, out, _ = check(capsys, runs["doubled"], "--baseline", baseline, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["passed"] is False and doc["results"][0]["status"] == "fail"
    code, out, _ = check(capsys, runs["doubled"], "--baseline", baseline, "--format", "markdown")
    assert "| ❌ | `batcher -> trainer/rank0 : batch` | 6.00 KiB/step | 12.00 KiB/step | +100 % |" in out


def test_output_file_and_verdict_on_stderr(runs, baseline, tmp_path, capsys):
    report = tmp_path / "flowmap.xml"
    code, out, err = check(capsys, runs["float64"], "--baseline", baseline, "-f", "junit", "-o", str(report))
    assert code == 1 and out == ""
    assert err.startswith("flowmap check FAILED: 1 regression")
    ET.parse(report)


def test_update_rewrites_the_baseline(runs, tmp_path, capsys):
    path = str(tmp_path / "b.json")
    code, _, err = check(capsys, runs["base"], "--baseline", path, "--update")  # first recording
    assert code == 0 and "updated" in err
    code, out, err = check(capsys, runs["float64"], "--baseline", path, "--update")  # accept it
    assert code == 0
    # the report says what was accepted, never "FAILED" beside an exit 0
    assert "FAILED" not in out + err
    assert "passed (baseline updated): 1 regression accepted" in out
    assert f"baseline {path} updated from {runs['float64']}" in err and "1 regression(s) accepted" in err
    assert json.load(open(path))["seams"][BATCH]["leaves"]["advantages"]["dtype"] == "float64"
    code, _, _ = check(capsys, runs["float64"], "--baseline", path)
    assert code == 0


def test_diff_prints_the_table(runs, capsys):
    assert main(["diff", runs["base"], runs["added_leaf"]]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[3].split() == ["seam", "A/step", "B/step", "delta", "ratio"]
    assert lines[4].split() == [*BATCH.split(), "6.00", "KiB", "14.00", "KiB", "+8.00", "KiB", "2.33x"]
    assert lines[5] == "    batch.routed_experts added: int32 [8, 64, 2, 2], 8.00 KiB/hop"
    assert lines[6].split()[:5] == ["rollout/0", "->", "ready_buffer", ":", "trajectory"]
    assert lines[6].split()[-1] == "1.00x"


def test_diff_against_a_baseline_file_and_bad_format(runs, baseline, capsys):
    assert main(["diff", baseline, runs["doubled"], "--format", "markdown"]) == 0
    assert "| `batcher -> trainer/rank0 : batch` | 6.00 KiB | 12.00 KiB | +6.00 KiB | 2.00x |" in capsys.readouterr().out
    assert main(["diff", baseline, runs["doubled"], "--format", "junit"]) == 2
    assert "choose one of text, markdown, json" in capsys.readouterr().err


def test_no_run_here_exits_2_in_a_subprocess(tmp_path, baseline):
    """As a user sees it: a fresh process, one line on stderr, no traceback."""
    out = cli(["check", "--baseline", baseline], cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("flowmap: no run found here")
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1


def test_failing_check_in_a_subprocess(runs, baseline):
    out = cli(["check", runs["float64"], "--baseline", baseline, "--tolerance", "10 %"])
    assert out.returncode == 1
    assert "batch.advantages float32 -> float64, +100 %" in out.stdout
    assert out.stderr == ""


def test_a_baseline_of_another_program_is_one_sentence_and_exit_2(runs, baseline, capsys, tmp_path):
    other = str(tmp_path / "other")
    with flowmap.tracing(other):  # another pipeline: an actor and a learner, no seam of the toy one's
        for s in range(3):
            flowmap.step(s)
            flowmap.hop("actor", "learner", {"obs": np.zeros((16, 4), np.float32)}, name="rollout")
            flowmap.hop("learner", "actor", np.zeros(64, np.float32), name="weights")
    code, out, err = check(capsys, other, "--baseline", baseline)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "belongs to another program" in err and "none of its 3 seams" in err
    # --update is the way to replace it on purpose: not refused
    copy = str(tmp_path / "replaced.json")
    shutil.copy(baseline, copy)
    code, _, _ = check(capsys, other, "--baseline", copy, "--update")
    assert code == 0
    # a run sharing a single seam with the baseline is the same program, compared as before
    code, out, _ = check(capsys, runs["new_seam"], "--baseline", baseline)
    assert code == 1 and "belongs to another program" not in out
