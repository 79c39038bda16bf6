"""The pure parts of bench/bench_peers.py: parsing, pairing, medians, the docs block.

No tool runs here (the bench is slow and its figures are timings); these pin
what the figures are made of, so a table printed by the bench means what its
header says.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import peers_stats as ps  # noqa: E402
import peers_tools as pt  # noqa: E402


def test_parse_measure_reads_the_last_line():
    m = ps.parse_measure("noise\n0 12.5 204800 30.25 0\n")
    assert m == ps.Measure(12.5, 204800.0, 30.25, 0)


@pytest.mark.parametrize("stdout, why", [
    ("", "expected 5 fields"),
    ("0 1.0 2.0 3.0", "expected 5 fields"),
    ("1 1.0 2.0 3.0 0", "status 1"),
])
def test_parse_measure_refuses_a_failed_or_garbled_run(stdout, why):
    with pytest.raises(ps.MeasureError, match=why):
        ps.parse_measure(stdout)


def test_rotated_starts_each_round_one_tool_later():
    tools = ["a", "b", "c"]
    assert [ps.rotated(tools, r) for r in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert ps.rotated([], 3) == []


def test_the_partner_runs_first_in_every_other_round():
    assert [ps.partner_first(r) for r in range(4)] == [True, False, True, False]


def test_each_ratio_is_to_the_plain_run_of_its_own_round():
    s = ps.Samples()
    s.add(ps.Measure(12.0, 300.0, 22.0), ps.Measure(10.0, 200.0, 20.0), 1000, 4)
    s.add(ps.Measure(30.0, 200.0, 44.0), ps.Measure(20.0, 200.0, 40.0), 3000, 3)
    assert s.wall == [1.2, 1.5]
    assert s.peak == [1.5, 1.0]
    assert s.cpu == [1.1, 1.1]
    row = ps.summarize("tool", s)
    assert (row.wall_ratio, row.peak_ratio, row.trace_bytes) == (1.35, 1.25, 2000)
    assert row.processes == 3  # the fewest: a round that missed a child shows
    assert row.rounds == 2


def test_round_line_shows_the_span_of_the_round_plain_runs():
    plains = [ps.Measure(9.5, 300 * 1024, 8.0), ps.Measure(12.25, 300 * 1024, 10.0)]
    line = ps.round_line(1, 5, plains, [("flowmap", 1.05, 1.025), ("memray", 1.2, 1.4)])
    assert line == ("round 2/5: plain 9.50–12.25 s, 8.00–10.00 CPU s, 300 MB; "
                    "flowmap 1.050× wall 1.025× CPU; memray 1.200× wall 1.400× CPU")


def test_median_of_an_odd_count_is_the_middle_round():
    s = ps.Samples()
    plain = ps.Measure(10.0, 100.0, 10.0)
    for wall in (30.0, 10.5, 11.0):
        s.add(ps.Measure(wall, 100.0, 10.0), plain, 5, 4)
    assert ps.summarize("t", s).wall_ratio == 1.1


def test_summarize_refuses_a_tool_without_rounds():
    with pytest.raises(ValueError, match="no rounds"):
        ps.summarize("t", ps.Samples())


@pytest.mark.parametrize("n, text", [
    (380_000, "0.38 MB"), (5_700_000, "5.70 MB"), (14_320_000, "14.3 MB"),
    (462_400_000, "462 MB")])
def test_format_bytes_keeps_three_figures(n, text):
    assert ps.format_bytes(n) == text


def _rows():
    return [ps.Row("flowmap", 1.0481, 1.0342, 1.049, 380_000, 4, 3),
            ps.Row("viztracer", 4.59, 3.2, 10.3, 462_000_000, 4, 3)]


def test_markdown_table_has_a_row_per_tool_and_aligned_columns():
    lines = ps.markdown_table(_rows()).splitlines()
    assert len(lines) == 4
    assert {ln.count("|") for ln in lines} == {7}
    assert lines[2] == "| flowmap | 1.048× | 1.034× | 1.05× | 0.38 MB | 4 |"
    assert lines[3] == "| viztracer | 4.590× | 3.200× | 10.30× | 462 MB | 4 |"


def test_doc_block_holds_command_context_rounds_table_and_notes():
    block = ps.doc_block("python bench/bench_peers.py --rounds 3", "3 rounds, load 0.5",
                         ["round 1/3: plain"], _rows(), ["py-spy: skipped"])
    lines = block.splitlines()
    assert lines[0] == ps.BEGIN_MARK and lines[-1] == ps.END_MARK
    assert "python bench/bench_peers.py --rounds 3" in lines
    assert lines.index("3 rounds, load 0.5") < lines.index("round 1/3: plain")
    assert "- py-spy: skipped" in lines
    assert sum(ln.startswith("| ") for ln in lines) == 3


def test_splice_replaces_only_the_marked_block():
    doc = f"intro\n{ps.BEGIN_MARK}\nold figures\n{ps.END_MARK}\noutro\n"
    new = ps.splice(doc, f"{ps.BEGIN_MARK}\nnew\n{ps.END_MARK}")
    assert new == f"intro\n{ps.BEGIN_MARK}\nnew\n{ps.END_MARK}\noutro\n"
    with pytest.raises(ValueError, match="no"):
        ps.splice("no markers here", "x")


def test_trace_bytes_counts_every_file_under_the_output(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_bytes(b"y" * 5)
    assert pt.trace_bytes(tmp_path) == 15
    assert pt.count_files(tmp_path, "*.json") == 1


def test_scan_finds_pids_cut_at_a_chunk_boundary(tmp_path):
    trace = tmp_path / "t.json"
    events = ",".join(f'{{"pid": {pid}, "tid": 1, "ph": "X"}}' for pid in (11, 2222, 11, 333))
    trace.write_text(f'{{"traceEvents": [{events}]}}')
    assert pt.scan_chrome_trace(trace) == pt.ChromeTrace(3, False)
    for chunk in range(7, 40):  # every cut through a `"pid": N` is found again
        assert pt.scan_chrome_trace(trace, chunk=chunk).processes == 3


def test_a_filled_viztracer_buffer_is_a_warning(tmp_path):
    (tmp_path / "v.json").write_text(
        '{"traceEvents": [{"pid": 1}], "viztracer_metadata": {"overflow": true}}')
    viz = {t.key: t for t in pt.all_tools()}["viztracer"]
    assert pt.scan_chrome_trace(tmp_path / "v.json") == pt.ChromeTrace(1, True)
    assert "buffer" in (viz.warning(tmp_path) or "")
    (tmp_path / "v.json").write_text('{"traceEvents": [], "viztracer_metadata": {}}')
    assert viz.warning(tmp_path) is None


def test_each_tool_writes_under_its_output_directory(tmp_path):
    job = ["examples/grpo_tiny.py", "--steps", "1"]
    for tool in pt.all_tools():
        cmd = tool.command(job, tmp_path)
        assert cmd[-3:] == job
        assert any(str(tmp_path) in part for part in cmd), tool.key


def test_boot_env_puts_the_peer_hook_first_only_for_tools_that_need_it(tmp_path):
    tools = {t.key: t for t in pt.all_tools()}
    env = pt.boot_env(tools["memray"], tmp_path, {"PYTHONPATH": "elsewhere"})
    assert env["PYTHONPATH"].split(":") == [str(pt.PEER_BOOT), "elsewhere"]
    assert (env["FLOWMAP_BENCH_PEER"], env["FLOWMAP_BENCH_OUT"]) == ("memray", str(tmp_path))
    assert pt.boot_env(tools["flowmap"], tmp_path, {"PYTHONPATH": "x"}) == {"PYTHONPATH": "x"}


MEASURE = Path(__file__).resolve().parents[2] / "bench" / "_measure.py"

# The command returns at once and leaves a child behind that holds 64 MiB and
# burns 0.3 s of CPU (by its own clock, so the figure does not depend on load).
ORPHAN = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", '''
import time
block = bytearray(64 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
while time.process_time() < 0.3:
    pass
'''])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreaping is Linux's")
def test_measure_counts_a_process_that_outlives_the_command():
    import subprocess

    out = subprocess.run([sys.executable, "-S", str(MEASURE), sys.executable, "-c", ORPHAN],
                         capture_output=True, text=True, check=True).stdout
    m = ps.parse_measure(out)
    assert m.unreaped == 0
    assert m.peak_kib >= 64 * 1024  # the orphan's RSS, not the short-lived command's
    assert m.cpu_s >= 0.3


def test_measure_reports_the_command_status():
    import subprocess

    out = subprocess.run([sys.executable, "-S", str(MEASURE), sys.executable, "-c",
                          "raise SystemExit(3)"], capture_output=True, text=True).stdout
    with pytest.raises(ps.MeasureError, match="status 3"):
        ps.parse_measure(out)
