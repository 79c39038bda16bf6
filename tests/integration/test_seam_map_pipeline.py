"""`flowmap trace --seams FILE`: a pipeline that never imports flowmap, traced only through
its seam map, against its explicitly instrumented twin; errors; child processes."""

from __future__ import annotations

import os
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import flowmap

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PIPELINE = EXAMPLES / "seam_map_pipeline.py"
TWIN = EXAMPLES / "seam_map_pipeline_instrumented.py"
SEAM_MAP = EXAMPLES / "seam_map_pipeline.yaml"


def seams_and_bytes(run_dir: Path) -> dict:
    """Everything a seam says about payloads: hops, bytes, transports, and each leaf."""
    run = flowmap.load(str(run_dir))
    return {
        key: (
            s.hops, s.total_bytes, s.max_bytes, sorted(s.transports.items()),
            [(leaf.path, leaf.kind, leaf.shape, leaf.dtypes, leaf.dims, leaf.total_bytes)
             for leaf in s.leaves],
        )
        for key, s in run.seams.items()
    }


def test_the_seam_mapped_pipeline_matches_its_instrumented_twin(tmp_path, run_cli):
    # GIVEN the example pipeline (no flowmap import) and its twin (explicit calls)
    assert "import flowmap" not in PIPELINE.read_text()
    # WHEN one is traced through its seam map and the other plainly (side by side: each
    # spends most of its time importing torch)
    with ThreadPoolExecutor(2) as pool:
        mapped_f = pool.submit(run_cli, ["trace", "-o", str(tmp_path / "mapped"), "--seams",
                                         str(SEAM_MAP), str(PIPELINE)], cwd=tmp_path)
        twin_f = pool.submit(run_cli, ["trace", "-o", str(tmp_path / "twin"), str(TWIN)],
                             cwd=tmp_path)
        mapped, twin = mapped_f.result(), twin_f.result()
    assert mapped.returncode == 0, mapped.stderr
    assert twin.returncode == 0, twin.stderr
    assert "never appeared" not in mapped.stderr
    # THEN both runs hold the same seams, leaves and bytes, steps and items
    a, b = seams_and_bytes(tmp_path / "mapped"), seams_and_bytes(tmp_path / "twin")
    assert a == b
    assert len(a) == 11
    assert ("main", "rollout", "prompts") in a and ("trainer", "advantage", "advantages") in a
    ra, rb = flowmap.load(str(tmp_path / "mapped")), flowmap.load(str(tmp_path / "twin"))
    assert ra.steps == rb.steps == [0, 1, 2]
    assert ra.items.total == rb.items.total == 12
    # and the program's own output is untouched
    assert mapped.stdout == twin.stdout and "step 3:" in mapped.stdout


def test_a_malformed_seam_map_exits_2_with_the_line_before_running(tmp_path, run_cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seams:\n  - target: seam_map_pipeline:score\n    owner: reward\n    arg: [x]\n")
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--seams", str(bad), str(PIPELINE)],
                cwd=tmp_path)
    assert r.returncode == 2
    assert f"{bad}:4: unknown key `arg`" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()  # the program never started


def test_an_unknown_preset_is_a_usage_error(tmp_path, run_cli):
    r = run_cli(["trace", "--preset", "nope", str(PIPELINE)], cwd=tmp_path)
    assert r.returncode == 2 and "no preset named 'nope'" in r.stderr and "trl" in r.stderr


SMALL_LIB = """
class Learner:
    def step(self, batch):
        return len(batch)
"""


def test_a_target_that_never_appears_warns_once_and_the_run_goes_on(tmp_path, run_cli):
    # GIVEN a map with one real target and two that do not exist
    (tmp_path / "small_lib.py").write_text(SMALL_LIB)
    (tmp_path / "prog.py").write_text("import small_lib\nprint(small_lib.Learner().step([1, 2]))\n")
    (tmp_path / "seams.yaml").write_text(textwrap.dedent("""
        seams:
          - {target: "small_lib:Learner.step", owner: trainer}
          - {target: "small_lib:Learner.no_such_method", owner: trainer}
          - {target: "no_such_package.mod:f", owner: trainer}
    """))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--seams", "seams.yaml", "prog.py"],
                cwd=tmp_path)
    # THEN the program ran to the end, the real seam is there, one warning per missing target
    assert r.returncode == 0, r.stderr
    assert r.stdout == "2\n"
    assert set(flowmap.load(str(tmp_path / "run")).seams) == {
        ("main", "trainer", "step"), ("trainer", "main", "step")}
    assert r.stderr.count("never appeared") == 2
    assert ("small_lib:Learner.no_such_method never appeared "
            "(small_lib.Learner has no attribute no_such_method)") in r.stderr
    assert ("no_such_package.mod:f never appeared "
            "(module no_such_package.mod was never imported)") in r.stderr
    # before the closing lines that name the run
    assert r.stderr.index("never appeared") < r.stderr.index("run written to")


CHILD_LIB = """
def work(batch):
    return [x * 2 for x in batch]
"""

PARENT = """
import multiprocessing as mp
import subprocess
import sys


def child():
    import childlib
    childlib.work([1, 2, 3])


if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    p.join()
    subprocess.run([sys.executable, "-c", "import childlib; childlib.work([4, 5])"], check=True)
"""


def test_child_processes_load_the_same_seam_map(tmp_path, run_cli):
    # GIVEN a program whose seams run only in a spawned and a subprocess child
    (tmp_path / "childlib.py").write_text(CHILD_LIB)
    (tmp_path / "parent.py").write_text(PARENT)
    (tmp_path / "seams.yaml").write_text("seams:\n  - {target: 'childlib:work', owner: worker}\n")
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--seams", "seams.yaml", "parent.py"],
                cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    # THEN both children recorded the seam into the one run, and nobody warned
    run = flowmap.load(str(tmp_path / "run"))
    calls = [h for h in run.hops if h.dst == "worker" and h.name == "work"]
    assert len(calls) == 2 and len({h.pid for h in calls}) == 2
    # the spawned child is named by its target, the subprocess (a program of its own) is `main`
    assert sorted(h.src for h in calls) == ["child", "main"]
    assert os.getpid() not in {h.pid for h in calls}
    assert "never appeared" not in r.stderr
