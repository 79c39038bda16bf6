"""The CLI's basics: --version, shell completion, the default run, figures in one format."""

from __future__ import annotations

import json
import math
import os
from importlib.metadata import version

import pytest
from runs import ShardWriter, tensor
from typer.testing import CliRunner

from flowmap.cli.main import app
from flowmap.model.run import newest_run
from flowmap.units import fmt_bytes, fmt_count, plural

runner = CliRunner()


def test_version_prints_the_distributions_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.output == f"flowmap {version('flowmap-rl')}\n"


def test_shell_completion_is_offered():
    r = runner.invoke(app, ["--help"])
    assert "--install-completion" in r.output and "--show-completion" in r.output


def _run(path, t0_wall_ns: int, meta_started: int | None) -> None:
    os.makedirs(path)
    w = ShardWriter(os.path.join(path, "h-1-0001.flowmap.jsonl"), 1)
    w.lines[0] = w.lines[0].replace("1700000000000000000", str(t0_wall_ns))
    w.hop(10, "a", "b", "x", [tensor("", (4,))], step=0)
    w.close(20)
    if meta_started is not None:
        with open(os.path.join(path, "run.json"), "w") as f:
            json.dump({"flowmap": "run", "schema": 1, "started_wall_ns": meta_started}, f)


def test_the_default_run_is_the_one_that_started_last_not_the_last_written(tmp_path):
    runs = tmp_path / "flowmap-runs"
    _run(runs / "older", 1_000, 1_000)
    _run(runs / "newer", 2_000, 2_000)
    (runs / "older" / "flowmap.html").write_text("<html></html>")  # written after "newer"
    os.utime(runs / "newer", (1, 1))
    for p in (runs / "newer").iterdir():
        os.utime(p, (1, 1))
    assert os.path.basename(newest_run(str(tmp_path))) == "newer"


def test_without_run_json_the_shard_headers_give_the_start(tmp_path):
    _run(tmp_path / "a", 5_000, None)
    _run(tmp_path / "b", 4_000, None)
    os.utime(tmp_path / "a", (1, 1))
    for p in (tmp_path / "a").iterdir():
        os.utime(p, (1, 1))
    assert os.path.basename(newest_run(str(tmp_path))) == "a"


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"), (1023.6, "1.00 KiB"), (1024, "1.00 KiB"),
    (99.996 * 1024, "100 KiB"), (999.6 * 1024, "1000 KiB"), (1023.7 * 1024, "1.00 MiB"),
    (5 * 2**20, "5.00 MiB"), (math.nan, "n/a"), (math.inf, "n/a"),
])
def test_sizes_never_read_in_e_notation(n, text):
    assert fmt_bytes(n) == text
    assert "e+" not in fmt_bytes(n)


@pytest.mark.parametrize("x, text", [
    (48, "48"), (0.004651, "0.004651"), (-0.04704, "-0.04704"), (1.0293, "1.029"),
    (12345.678, "12,345.7"), (math.nan, "n/a"), (2.5e6, "2,500,000"),
])
def test_counters_never_read_in_e_notation(x, text):
    assert fmt_count(x) == text


def test_one_hop_is_singular():
    assert plural(1, "hop") == "1 hop" and plural(2, "hop") == "2 hops"


@pytest.mark.parametrize("flag", ["--html", "--dot", "--svg"])
def test_render_never_creates_folders(tmp_path, flag):
    from runs import write_rl_run

    run = write_rl_run(str(tmp_path / "run"))
    target = tmp_path / "nonexist" / "dir" / "o.html"
    r = runner.invoke(app, ["render", run, flag, str(target)])
    assert r.exit_code == 2
    assert f"the folder {target.parent} does not exist" in r.output
    assert not (tmp_path / "nonexist").exists()


def test_an_output_under_a_file_is_one_clear_sentence(tmp_path):
    from runs import write_rl_run

    run = write_rl_run(str(tmp_path / "run"))
    (tmp_path / "afile").write_text("x")
    for args in (["render", run, "--html", str(tmp_path / "afile" / "o.html")],
                 ["export", run, "--perfetto", str(tmp_path / "afile" / "t.json")]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2
        assert f"{tmp_path / 'afile'} is a file, not a folder" in r.output
        assert "File exists" not in r.output and "Traceback" not in r.output


def test_merging_a_run_with_itself_or_its_copy_is_refused(tmp_path):
    import shutil

    from runs import write_rl_run

    run = write_rl_run(str(tmp_path / "run"))
    shutil.copytree(run, tmp_path / "copy")
    for args in ([run, run], [run, str(tmp_path / "copy")]):
        out = tmp_path / f"merged{len(os.listdir(tmp_path))}"
        r = runner.invoke(app, ["merge", "-o", str(out), *args])
        assert r.exit_code == 2, r.output
        assert "is the same recording as" in r.output and "give each run once" in r.output
        assert not out.exists()
    ok = runner.invoke(app, ["merge", "-o", str(tmp_path / "once"), run])
    assert ok.exit_code == 0, ok.output


def test_usage_lines_read_as_typed():
    trace = runner.invoke(app, ["trace", "--help"]).output
    assert "Usage: flowmap trace [OPTIONS] SCRIPT [ARGS]..." in trace
    render = runner.invoke(app, ["render", "--help"]).output
    assert "Usage: flowmap render [OPTIONS] [RUN] [HTML_PATH]\n" in render
    assert "]]..." not in render


def test_report_help_lists_top_all_and_width():
    out = runner.invoke(app, ["report", "--help"]).output
    assert "--top" in out and "--all" in out and "--width" in out
