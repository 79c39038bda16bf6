"""`flowmap trace` end to end: how the program ended reaches the report; a file as -o is refused."""

from __future__ import annotations

import json
import textwrap


def _script(tmp_path, body: str):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    return script


def test_a_crash_is_the_exit_status_and_the_report_says_so(tmp_path, run_cli):
    script = _script(tmp_path, """
        import flowmap
        flowmap.hop("a", "b", b"abc", name="x")
        raise RuntimeError("boom")
    """)
    run = tmp_path / "run"
    r = run_cli(["trace", "-o", str(run), str(script)], cwd=tmp_path)
    assert r.returncode == 1 and "RuntimeError: boom" in r.stderr
    report = run_cli(["report", str(run)], cwd=tmp_path, env={"COLUMNS": "120"})
    assert report.returncode == 0, report.stderr
    assert "health: CHECK" in report.stdout and "the program failed (exit code 1)" in report.stdout
    doc = json.loads(run_cli(["report", "--json", str(run)], cwd=tmp_path).stdout)
    assert doc["program"]["exit_code"] == 1 and doc["program"]["wall_s"] > 0


def test_an_existing_file_as_the_run_directory_is_refused_before_the_program_runs(tmp_path, run_cli):
    marker = tmp_path / "ran"
    script = _script(tmp_path, f"""
        open({str(marker)!r}, "w").close()
    """)
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    r = run_cli(["trace", "-o", str(target), str(script)], cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "is a file, not a run directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1  # one sentence, no "capture is off", no "run written"
    assert not marker.exists()
    assert target.read_text() == "mine\n"
