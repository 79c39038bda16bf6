"""How the traced program ended, and how long it ran, in every output: report text, JSON, HTML, check.

run.json holds the exit code (1 for a crash, 130 for Ctrl-C) and the wall-clock start and finish;
a run that crashed must not read "health: ok" with no word of it, and a run that recorded no hop
still ran for its seconds.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from runs import ShardWriter, write_rl_run
from typer.testing import CliRunner

import flowmap
from flowmap.cli.main import app
from flowmap.reporters.html import render_html

S = 1_000_000_000
STARTED = 1_796_395_998_762_344_094


def _with_meta(path: str, **fields) -> str:
    meta = {"flowmap": "run", "schema": 1, "command": ["train.py"], **fields}
    with open(os.path.join(path, "run.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)
    return path


def _report(path: str, *args: str):
    r = CliRunner().invoke(app, ["report", path, *args], env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    return r.output


def _html_data(path: str) -> dict:
    page = render_html(flowmap.load(path).view)
    m = re.search(r'<script type="application/json" id="flowmap-data">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


@pytest.mark.parametrize("code, words", [
    (1, "the program failed (exit code 1)"),
    (130, "the program was interrupted (Ctrl-C, exit code 130)"),
    (137, "the program was killed by SIGKILL (exit code 137)"),
])
def test_a_program_that_did_not_exit_0_is_said_in_text_json_and_html(tmp_path, code, words):
    run = _with_meta(write_rl_run(str(tmp_path / "run")), exit_code=code,
                     started_wall_ns=STARTED, finished_wall_ns=STARTED + 11 * S)
    text = " ".join(_report(run).split())
    assert "health: CHECK" in text and words in text
    assert "health: ok" not in text
    doc = json.loads(_report(run, "--json"))
    assert doc["program"] == {"exit_code": code, "failed": True, "wall_s": 11.0, "ended": words}
    data = _html_data(run)["run"]
    assert data["exit_code"] == code and data["failed"] and data["ended"] == words


def test_a_clean_exit_is_said_too(tmp_path):
    run = _with_meta(write_rl_run(str(tmp_path / "run")), exit_code=0,
                     started_wall_ns=STARTED, finished_wall_ns=STARTED + 11 * S)
    text = " ".join(_report(run).split())
    assert "health: ok" in text and "the program exited 0" in text
    assert json.loads(_report(run, "--json"))["program"]["exit_code"] == 0
    assert _html_data(run)["run"]["failed"] is False


def test_a_run_without_an_exit_code_says_nothing_of_one(tmp_path):
    run = write_rl_run(str(tmp_path / "run"))  # run.json without exit_code: flowmap.trace() in-process
    text = " ".join(_report(run).split())
    assert "health: ok" in text and "exit" not in text.split("health:")[1].split("items")[0]
    assert json.loads(_report(run, "--json"))["program"]["exit_code"] is None


def test_an_empty_run_reports_the_programs_wall_time(tmp_path):
    path = tmp_path / "empty"
    os.makedirs(path)
    w = ShardWriter(str(path / "h-1-0001.flowmap.jsonl"), 1)
    w.close(5)
    _with_meta(str(path), exit_code=0, started_wall_ns=STARTED, finished_wall_ns=STARTED + 11 * S)
    text = _report(str(path))
    assert "11.0 s" in text and "0.0 s" not in text
    assert json.loads(_report(str(path), "--json"))["program"]["wall_s"] == 11.0
    assert _html_data(str(path))["run"]["wall_s"] == 11.0


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_check_says_the_program_crashed(tmp_path, fmt):
    run = write_rl_run(str(tmp_path / "run"))
    base = str(tmp_path / "base.json")
    assert CliRunner().invoke(app, ["baseline", run, "-o", base]).exit_code == 0
    _with_meta(run, exit_code=1)
    r = CliRunner().invoke(app, ["check", run, "--baseline", base, "--format", fmt])
    assert r.exit_code == 0, r.output
    assert "the program failed (exit code 1)" in r.output
    _with_meta(run, exit_code=0)
    clean = CliRunner().invoke(app, ["check", run, "--baseline", base, "--format", fmt])
    assert "the program" not in clean.output
