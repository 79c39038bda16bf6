"""The terminal report fits its width, leads with the findings, and never splits a figure."""

from __future__ import annotations

import io
import re

import pytest
from rich.cells import cell_len
from rich.console import Console
from runs import write_rl_run
from typer.testing import CliRunner

import flowmap
from flowmap.cli.main import app
from flowmap.findings import findings
from flowmap.model.format import fmt_bytes, fmt_per_step
from flowmap.reporters.columns import shorten_parts, wrap
from flowmap.reporters.terminal import TOP_FINDINGS, TOP_SEAMS, print_report

SCREEN = 24  # rows of a default terminal: the findings must start on it


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("r") / "run"))).view


def _render(view, width: int, **kw) -> list[str]:
    buf = io.StringIO()
    print_report(view, Console(file=buf, width=width, force_terminal=False, color_system=None), **kw)
    return buf.getvalue().splitlines()


@pytest.mark.parametrize("width", [80, 120])
def test_every_line_fits_the_width(view, width):
    lines = _render(view, width)
    assert max(cell_len(ln) for ln in lines) <= width
    assert len(lines) <= 150


@pytest.mark.parametrize("width", [80, 120])
def test_findings_come_first_with_their_bytes(view, width):
    lines = _render(view, width)
    head = next(i for i, ln in enumerate(lines) if ln.startswith("Findings"))
    assert head < SCREEN
    assert head < next(i for i, ln in enumerate(lines) if ln.startswith("Seams"))
    top = findings(view)[0]
    assert fmt_per_step(top.bytes_per_step) in lines[head + 1]


@pytest.mark.parametrize("width", [80, 120])
def test_no_figure_is_split_across_lines(view, width):
    lines = _render(view, width, top=None, findings=None)
    # a line may not end in a bare number whose unit starts the next line
    for a, b in zip(lines, lines[1:], strict=False):
        assert not (re.search(r"\d$", a) and re.match(r"\s*(B|KiB|MiB|GiB)\b", b)), (a, b)
    text = "\n".join(lines)
    for s in view.seams.values():  # each seam's per-step figure appears whole on its row
        assert fmt_bytes(s.bytes_per_step_mean) in text


def test_seam_rows_are_the_heaviest_and_truncated(view):
    lines = _render(view, 80)
    head = next(i for i, ln in enumerate(lines) if ln.startswith("Seams"))
    rows = lines[head + 2: head + 2 + TOP_SEAMS + 1]
    rows = rows[: rows.index("")] if "" in rows else rows
    assert len(rows) == min(TOP_SEAMS, len(view.seams))
    heaviest = next(iter(view.seams.values()))
    assert rows[0].startswith(heaviest.src)
    if len(view.seams) > TOP_SEAMS:
        assert f"({TOP_SEAMS} of {len(view.seams)};" in lines[head]


def test_narrow_columns_are_dropped_not_squeezed(view):
    wide = _render(view, 160)
    narrow = _render(view, 80)
    header = next(ln for ln in narrow if ln.startswith("seam "))
    assert "per step" in header and "hops" in header
    assert "max/hop" not in header
    assert "max/hop" in next(ln for ln in wide if ln.startswith("seam "))


def test_wrap_keeps_a_figure_with_its_unit():
    text = "x" * 70 + " 416 KiB/step and more"
    lines = wrap(text, 74)
    assert lines[1].startswith("416 KiB/step")
    assert all(cell_len(ln) <= 74 for ln in lines)
    # a duration too: the run summary ends in one (`· 14.5 s`)
    assert wrap("x" * 116 + " · 14.5 s", 120) == ["x" * 116 + " ·", "14.5 s"]
    assert wrap("3 seams", 6) == ["3", "seams"]  # `s` glues as seconds only, not as a prefix


def test_seam_labels_shorten_the_longest_part_first():
    label = shorten_parts(("driver", "trainer/rank1", "initial_weights"), (" → ", " : "), 38)
    assert cell_len(label) == 38 and label.endswith("ights")
    assert "trainer/rank1" in label and label.startswith("driver → ")


def test_cli_top_and_all(tmp_path):
    path = write_rl_run(str(tmp_path / "run"))
    runner = CliRunner()
    n = len(flowmap.load(path).view.seams)
    top = runner.invoke(app, ["report", path, "--top", "2", "--width", "80"])
    assert top.exit_code == 0, top.output
    assert f"(2 of {n};" in top.output
    every = runner.invoke(app, ["report", path, "--all", "--width", "100"])
    assert every.exit_code == 0
    assert "of {n};" not in every.output
    assert max(cell_len(ln) for ln in every.output.splitlines()) <= 100
    bad = runner.invoke(app, ["report", path, "--top", "0"])
    assert bad.exit_code == 2
    if len(findings(flowmap.load(path).view)) > TOP_FINDINGS:
        assert "--all shows every one" in top.output


def _run_with_a_killed_worker(tmp_path, exit_code):
    import json
    import os

    from runs import ShardWriter, tensor

    path = tmp_path / f"exit{exit_code}"
    os.makedirs(path)
    main = ShardWriter(str(path / "h-1-0001.flowmap.jsonl"), 1)
    worker = ShardWriter(str(path / "h-2-0001.flowmap.jsonl"), 2)
    main.hop(10, "driver", "worker", "task", [tensor("x", (64,))], step=0, transport="pickle")
    worker.hop(20, "worker", "driver", "result", [tensor("y", (64,))], step=0, transport="pickle")
    main.close(30)
    worker.close(25, clean=False)  # SIGKILLed: no end event
    (path / "run.json").write_text(json.dumps({"flowmap": "run", "schema": 1, "exit_code": exit_code}))
    return flowmap.load(str(path)).view


def test_a_worker_reaped_after_a_clean_exit_is_not_a_crash(tmp_path):
    reaped = " ".join(_render(_run_with_a_killed_worker(tmp_path, 0), 100))
    assert "cut short" not in reaped and "health: ok" in reaped
    assert "1 worker ended without closing its shard after the program exited 0" in reaped
    crashed = " ".join(_render(_run_with_a_killed_worker(tmp_path, 1), 100))
    assert "health: CHECK" in crashed and "the run was cut short" in crashed


def _long_names_run(tmp_path):
    """Seams named as a single-file GRPO script names its functions: long, and alike."""
    import os

    from runs import ShardWriter, tensor

    path = tmp_path / "long"
    os.makedirs(path)
    w = ShardWriter(str(path / "h-1-0001.flowmap.jsonl"), 1)
    seams = [("replay_buffer", "batch_assembly", "zero_pad_sequences"),
             ("rollout", "group_advantages", "returns"),
             ("main", "sequences_log_probs", "sequences"),
             ("experience_buffer_append", "replay_buffer_sample_minibatch", "join_experience_batch")]
    t = 10
    for s in range(3):
        for k, (src, dst, name) in enumerate(seams):
            w.hop(t, src, dst, name, [tensor("x", (8, 16 * (k + 1)), "int64")], step=s)
            t += 10
    w.close(t)
    return flowmap.load(str(path)).view, seams


def test_at_80_columns_seam_names_stay_whole(tmp_path):
    view, seams = _long_names_run(tmp_path)
    lines = _render(view, 80)
    assert max(cell_len(ln) for ln in lines) <= 80
    table = lines[next(i for i, ln in enumerate(lines) if ln.startswith("Seams")):
                  next(i for i, ln in enumerate(lines) if ln.startswith("Owners"))]
    assert not any("…" in ln for ln in table), table
    words = {w for ln in table for w in re.split(r"[\s→:]+", ln)}
    for src, dst, name in seams:
        assert {src, dst, name} <= words, (src, dst, name, table)
    for s in view.seams.values():  # the figures sit on the line that starts the seam
        first = next(ln for ln in table if ln.startswith(s.src + " "))
        assert fmt_bytes(s.bytes_per_step_mean) in first


def test_through_the_cli_at_columns_80(tmp_path):
    view, seams = _long_names_run(tmp_path)
    r = CliRunner().invoke(app, ["report", view.path], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert max(cell_len(ln) for ln in r.output.splitlines()) <= 80
    table = r.output.split("Seams")[1].split("Owners")[0]
    assert "zero_pad_sequences" in table and "replay_buffer" in table and "…" not in table


@pytest.mark.parametrize("width", [80, 120])
def test_owners_figures_say_they_are_whole_run_totals(view, width):
    lines = _render(view, width)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Owners"))
    assert "whole run" in lines[at]
    header = lines[at + 1].split()
    figures = [t for t in header if t not in ("owner", "role")]
    # every figure column carries its unit, as the seams' `per step` and `max/hop` do
    assert figures and all(t.endswith("/run") or t in ("bytes", "hops", "in", "out") for t in figures)
    assert "in/run" in header and "out/run" in header
    trainer = view.owners["trainer/rank0"]  # and the figures are the run's: bytes in over every step
    row = next(ln for ln in lines[at + 2:] if ln.startswith("trainer/rank0 "))
    assert fmt_bytes(trainer.bytes_in) in row


@pytest.mark.parametrize("width", [40, 80, 120])
def test_the_more_commands_are_never_cut(width):
    """At any width each next command pastes whole: folded only with shell continuations."""
    from flowmap.reporters.terminal import next_commands

    path = "flowmap-runs/grpo_single_file-20261206-040811/" + "x" * 70
    lines = next_commands(path, width)
    assert all(cell_len(ln) <= width for ln in lines)
    text = "\n".join(lines).replace("\\\n", "")  # what bash reads from a paste
    commands = [ln.removeprefix("more:").strip() for ln in text.splitlines()]
    assert commands == [f"flowmap report {path} --all", f"flowmap report {path} --json",
                        f"flowmap render {path} --html"]
    short = next_commands("run", width)
    assert short == ["more: flowmap report run --all | --json", "      flowmap render run --html"]
