"""The CLI in process, through typer's CliRunner: exit codes, the one-line messages, figures.

Each run is written by hand (`runs.write_two_owner_run`), so every figure the
CLI prints is checked against one worked out here from the hops themselves.
Real tracing goes through subprocesses in tests/integration.
"""

from __future__ import annotations

import json

import pytest
from runs import write_two_owner_run
from typer.testing import CliRunner

from flowmap.cli.main import app

# (t_us, src, dst, name, nbytes): steps are index // 2, so two steps.
HOPS = [(0, "a", "b", "x", 100), (10, "a", "b", "x", 300), (20, "b", "c", "y", 50),
        (30, "b", "c", "y", 70)]
HEAVIER = [(0, "a", "b", "x", 100), (10, "a", "b", "x", 900), (20, "b", "c", "y", 50),
           (30, "b", "c", "y", 70)]


def flowmap(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "240"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def run_dir(tmp_path):
    return write_two_owner_run(str(tmp_path / "run"), HOPS)


def test_report_json_carries_the_figures_of_the_hops(run_dir):
    """GIVEN 2 steps of a -> b : x (100 B, 300 B) WHEN `report --json` THEN 400 B, 200 B/step."""
    code, out, err = flowmap("report", run_dir, "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    seams = {(s["src"], s["dst"], s["name"]): s for s in doc["seams"]}
    x = seams[("a", "b", "x")]
    assert (x["hops"], x["total_bytes"], x["max_bytes"]) == (2, 100 + 300, 300)
    assert x["bytes_per_step"] == (100 + 300) / 2 and doc["steps"] == 2
    assert [s["name"] for s in doc["seams"]] == ["x", "y"]  # heaviest first: 400 B before 120 B


def test_the_terminal_report_names_each_seam(run_dir):
    code, out, err = flowmap("report", run_dir)
    assert (code, err) == (0, "")
    assert "2 steps · 4 hops · 2 seams" in out and "400 B" in out and "120 B" in out


@pytest.mark.parametrize("args, exit_code, message", [
    (["report", "{tmp}/missing"], 2, "flowmap: {tmp}/missing does not exist"),
    (["report", "{run}", "--project", "no-such-model"], 2, "flowmap: no preset 'no-such-model'"),
    (["render", "{run}"], 2, "flowmap: say what to write: --dot PATH"),
    (["render", "{run}", "page.html"], 2, "flowmap: page.html looks like an HTML path"),
    (["export", "{run}"], 2, "flowmap: say what to write: --perfetto PATH"),
    (["export", "{run}", "--perfetto", "{tmp}/t.json", "--steps", "5:3"], 2, "ends before it starts"),
    (["export", "{run}", "--perfetto", "{tmp}/t.json", "--steps", "7:9"], 2, "no hops in steps 7..9"),
    (["check", "{run}"], 2, "flowmap: nothing to check against"),
    (["check", "{run}", "--update"], 2, "flowmap: --update needs --baseline FILE"),
    (["check", "{run}", "-b", "{tmp}/none.json"], 2, "baseline {tmp}/none.json not found"),
    (["check", "{run}", "-b", "{tmp}/none.json", "-t", "lots"], 2, "flowmap: cannot read"),
    (["diff", "{run}", "{run}", "--format", "yaml"], 2, "flowmap: unknown --format 'yaml' for diff"),
])
def test_usage_mistakes_exit_2_with_one_line(run_dir, tmp_path, args, exit_code, message):
    """GIVEN a mistake WHEN the verb runs THEN one `flowmap: ...` line on stderr, no traceback."""
    def fill(text: str) -> str:
        return text.format(tmp=tmp_path, run=run_dir)

    code, out, err = flowmap(*map(fill, args))
    assert code == exit_code
    assert fill(message) in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err + out


def test_no_run_here_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = flowmap("report")
    assert code == 2 and "no run found here; trace one with `flowmap trace SCRIPT`" in err


def test_an_unknown_option_is_a_click_usage_error(run_dir):
    code, _, err = flowmap("report", run_dir, "--no-such-option")
    assert code == 2 and "No such option" in err


def test_baseline_then_check_passes_on_the_same_run(run_dir, tmp_path):
    """GIVEN a baseline of a run WHEN the same run is checked THEN exit 0 and the next step named."""
    base = tmp_path / "base.json"
    code, _, err = flowmap("baseline", run_dir, "-o", base)
    assert code == 0
    assert f"baseline written to {base} (2 seams, 2 steps)" in err
    assert f"next: flowmap check {run_dir} --baseline {base}" in err
    assert json.loads(base.read_text())["seams"]["a -> b : x"]["bytes_per_step"] == 200
    code, out, _ = flowmap("check", run_dir, "-b", base)
    assert code == 0 and "a -> b : x" in out


def test_check_fails_with_exit_1_when_a_seam_grows(run_dir, tmp_path):
    """GIVEN x at 200 B/step WHEN a run carries 500 B/step THEN exit 1 naming the seam and figures."""
    base = tmp_path / "base.json"
    flowmap("baseline", run_dir, "-o", base)
    heavier = write_two_owner_run(str(tmp_path / "heavier"), HEAVIER)
    code, out, _ = flowmap("check", heavier, "-b", base, "--min-bytes", "1")
    assert code == 1
    assert "FAIL    a -> b : x" in out
    # (100 + 300) / 2 = 200 B/step before, (100 + 900) / 2 = 500 B/step after: +150 %
    assert "bytes/step 200 B -> 500 B (+150 %; limit 220 B)" in out
    assert "x.data [100..300] -> [100..900]" in out  # the leaf whose size range grew


def test_a_budget_breach_exits_1(run_dir, tmp_path):
    budget = tmp_path / "budget.yaml"
    budget.write_text('seams:\n  "a -> b : x":\n    max_bytes_per_step: 350 B\n')
    code, out, _ = flowmap("check", run_dir, "--budget", budget)
    assert code == 1
    # the heaviest step of x carries 100 + 300 = 400 B (both hops are step 0)
    assert "was limited to 350 B per step but carried 400 B" in out


def test_diff_json_gives_the_delta_per_seam(run_dir, tmp_path):
    heavier = write_two_owner_run(str(tmp_path / "heavier"), HEAVIER)
    code, out, err = flowmap("diff", run_dir, heavier, "-f", "json")
    assert (code, err) == (0, "")
    deltas = {d["seam"]: d for d in json.loads(out)["seams"]}
    x = deltas["a -> b : x"]
    assert (x["a_bytes_per_step"], x["b_bytes_per_step"]) == (200, 500)
    assert x["delta_bytes_per_step"] == 300 and x["ratio"] == 2.5
    assert deltas["b -> c : y"]["status"] == "same"
