"""`flowmap render`, `flowmap export` and the findings in `flowmap report`, driven as a user would."""

from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest
from runs import RLRunSpec, check_trace_rules, write_rl_run

from flowmap.cli.main import main

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


@pytest.fixture()
def run_dir(tmp_path):
    return write_rl_run(str(tmp_path / "run"), RLRunSpec(hostile=True))


def flowmap_cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_render_dot_writes_the_graph_and_prints_its_path(run_dir, tmp_path, capsys):
    code, out, err = flowmap_cli(["render", run_dir, "--dot", tmp_path / "g.dot"], capsys)
    assert (code, err) == (0, "")
    assert out.strip() == str(tmp_path / "g.dot")
    text = (tmp_path / "g.dot").read_text()
    assert text.startswith("digraph flowmap {") and "rollout ×2" in text


def test_render_instances_draws_one_node_per_owner(run_dir, tmp_path, capsys):
    flowmap_cli(["render", run_dir, "--instances", "--dot", tmp_path / "g.dot"], capsys)
    text = (tmp_path / "g.dot").read_text()
    assert '"rollout/0\\n' in text and "×2" not in text


@needs_dot
def test_render_svg_and_png_at_once(run_dir, tmp_path, capsys):
    code, out, _ = flowmap_cli(["render", run_dir, "--svg", tmp_path / "g.svg",
                                "--png", tmp_path / "g.png"], capsys)
    assert code == 0 and out.split() == [str(tmp_path / "g.svg"), str(tmp_path / "g.png")]
    svg = (tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<img" not in svg
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_svg_without_graphviz_says_how_to_install_it(run_dir, tmp_path, capsys,
                                                             monkeypatch):
    monkeypatch.setenv("PATH", "")
    code, out, err = flowmap_cli(["render", run_dir, "--svg", tmp_path / "g.svg"], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "apt-get install graphviz" in err
    assert "brew install graphviz" in err and "Traceback" not in err
    assert not (tmp_path / "g.svg").exists()


def test_missing_graphviz_in_a_fresh_process(run_dir, tmp_path, run_cli):
    r = run_cli(["render", run_dir, "--png", str(tmp_path / "g.png")], env={"PATH": ""})
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("flowmap: Graphviz's `dot` is not installed")
    assert "Traceback" not in r.stderr


def test_render_needs_an_output(run_dir, capsys):
    code, _, err = flowmap_cli(["render", run_dir], capsys)
    assert code == 2 and "--dot PATH" in err


def test_an_html_path_without_html_is_a_usage_error(run_dir, capsys):
    code, _, err = flowmap_cli(["render", run_dir, "out.html"], capsys)
    assert code == 2 and "add --html" in err


def test_render_of_a_missing_run_is_one_line(tmp_path, capsys):
    code, _, err = flowmap_cli(["render", tmp_path / "nope", "--dot", tmp_path / "g.dot"], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err


def test_render_html_defaults_to_the_run_directory(run_dir, capsys):
    code, out, _ = flowmap_cli(["render", run_dir, "--html"], capsys)
    assert code == 0 and out.strip() == os.path.join(run_dir, "flowmap.html")
    assert os.path.getsize(out.strip()) > 0


def test_render_html_to_a_given_path_in_either_order(run_dir, tmp_path, capsys):
    for args in (["render", run_dir, "--html", tmp_path / "a.html"],
                 ["render", "--html", tmp_path / "b.html", run_dir]):
        code, out, _ = flowmap_cli(args, capsys)
        assert code == 0 and out.strip() == str(args[-1] if args[1] == run_dir else args[2])
    assert (tmp_path / "a.html").exists() and (tmp_path / "b.html").exists()


def test_export_perfetto_writes_trace_event_json(run_dir, tmp_path, capsys):
    code, out, _ = flowmap_cli(["export", run_dir, "--perfetto", tmp_path / "t.json"], capsys)
    assert code == 0 and out.strip() == str(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    phases = {e["ph"] for e in trace["traceEvents"]}
    assert {"M", "X", "s", "f", "C", "i"} <= phases


def test_export_needs_a_format(run_dir, capsys):
    code, _, err = flowmap_cli(["export", run_dir], capsys)
    assert code == 2 and "--perfetto PATH" in err


def test_report_json_lists_findings_most_bytes_first(run_dir, capsys):
    code, out, _ = flowmap_cli(["report", run_dir, "--json"], capsys)
    found = json.loads(out)["findings"]
    assert code == 0 and found
    values = [f["bytes_per_step"] for f in found]
    assert values == sorted(values, reverse=True)
    # (its pickled trajectories are a few KiB each: no serialisation finding, by its rule)
    assert {"pass_through", "dropped", "padding", "duplicate"} <= {f["kind"] for f in found}


def test_report_shows_a_findings_table(run_dir, capsys):
    code, out, _ = flowmap_cli(["report", run_dir], capsys)
    assert code == 0 and "Findings, most bytes at stake per step first" in out and "pass-through" in out


def test_a_traced_program_renders_and_exports(tmp_path, run_cli):
    """GIVEN a program traced for real WHEN rendered and exported THEN both outputs are written."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import flowmap
        for step in range(3):
            flowmap.step(step)
            batch = {"input_ids": np.zeros((4, 16), np.int64),
                     "attention_mask": np.ones((4, 16), np.int64)}
            flowmap.hop("batcher", "trainer/rank0", batch, name="batch", items=[step])
            flowmap.hop("trainer/rank0", "rollout/0", {"w": np.zeros(64, np.float32)},
                        name="weights", transport="rpc")
            flowmap.counter("loss", 1.0 / (step + 1))
    """))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_cli(["render", str(tmp_path / "run"), "--dot", str(tmp_path / "g.dot")])
    assert r.returncode == 0, r.stderr
    assert "batcher" in (tmp_path / "g.dot").read_text()
    r = run_cli(["export", str(tmp_path / "run"), "--perfetto", str(tmp_path / "t.json")])
    assert r.returncode == 0, r.stderr
    check_trace_rules(json.loads((tmp_path / "t.json").read_text()))


def test_export_a_range_of_steps(run_dir, tmp_path, capsys):
    code, _, _ = flowmap_cli(["export", run_dir, "--perfetto", tmp_path / "t.json",
                              "--steps", "1:2"], capsys)
    trace = json.loads((tmp_path / "t.json").read_text())
    check_trace_rules(trace)
    steps = {e["args"]["step"] for e in trace["traceEvents"]
             if e["ph"] == "X" and "step" in e["args"]}
    assert code == 0 and steps == {1, 2}


@pytest.mark.parametrize(("steps", "why"), [("x", "write it like"), ("3:1", "ends before"),
                                            ("90:99", "no hops in steps 90..99")])
def test_export_steps_that_make_no_sense(run_dir, tmp_path, capsys, steps, why):
    code, _, err = flowmap_cli(["export", run_dir, "--perfetto", tmp_path / "t.json",
                                "--steps", steps], capsys)
    assert code == 2 and why in err and err.count("\n") == 1
