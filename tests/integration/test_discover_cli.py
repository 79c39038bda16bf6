"""`flowmap discover`: finds the hand-written map's seams, round-trips through `flowmap trace`,
passes the program's output and exit status through, follows children, refuses bad input."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from discover_records import assert_round_trip, discovered

from flowmap.seams import load_seam_map

pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PIPELINE = EXAMPLES / "seam_map_pipeline.py"
HAND_MAP = EXAMPLES / "seam_map_pipeline.yaml"
@pytest.mark.slow
def test_discovery_finds_every_hand_written_seam_and_the_map_round_trips(tmp_path, run_cli):
    # GIVEN the example pipeline, which never imports flowmap, and its hand-written map
    plain = subprocess.run([sys.executable, str(PIPELINE)], capture_output=True, text=True,
                           cwd=tmp_path, timeout=120)
    # WHEN discovery runs it
    r = run_cli(["discover", "-o", str(tmp_path / "seams.yaml"), str(PIPELINE)], cwd=tmp_path)
    # THEN the program ran as it does alone: same output, same status
    assert r.returncode == plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout and "step 3:" in r.stdout
    # and every target of the hand-written map is in the discovered map
    found = {s.target: s for s in load_seam_map(str(tmp_path / "seams.yaml")).seams}
    hand = {s.target: s for s in load_seam_map(str(HAND_MAP)).seams}
    assert set(hand) <= set(found), set(hand) - set(found)
    # with the same call/result flags wherever an argument carried a tensor
    for target in ("seam_map_pipeline:RolloutWorker.generate", "seam_map_pipeline:score",
                   "seam_map_pipeline:Learner.train_step"):
        assert found[target].args == ({"generate": ("prompts",), "score": ("trajectories",)}
                                      .get(target.rsplit(".", 1)[-1].split(":")[-1], ("batch",)))
    assert found["seam_map_pipeline:WeightSync.push"].result is False
    assert "load_weights folds" not in r.stderr and "folds in: seam_map_pipeline:RolloutWorker." \
        "load_weights" in r.stderr
    # the table ranks by bytes per step and names each seam's owner
    assert re.search(r"seam_map_pipeline:RolloutWorker.generate\s+3\s", r.stderr)
    # WHEN the written map is traced, THEN it records what discovery saw
    t = run_cli(["trace", "-o", str(tmp_path / "run"), "--seams", str(tmp_path / "seams.yaml"),
                 str(PIPELINE)], cwd=tmp_path)
    assert t.returncode == 0, t.stderr
    assert "never appeared" not in t.stderr
    assert_round_trip(tmp_path / "seams.yaml", tmp_path / "run")


def test_module_form_and_exit_status_pass_through(tmp_path, run_cli):
    (tmp_path / "quitter.py").write_text(textwrap.dedent("""
        import sys
        import torch

        def hand_over(x):
            return x * 2

        if __name__ == "__main__":
            print("args", sys.argv[1:])
            import quitter
            quitter.hand_over(torch.ones(4))
            sys.exit(3)
    """))
    r = run_cli(["discover", "-o", "m.yaml", "-m", "quitter", "--flag", "x"], cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert r.stdout == "args ['--flag', 'x']\n"
    assert [s.target for s in load_seam_map(str(tmp_path / "m.yaml")).seams] == [
        "quitter:hand_over"]


def test_a_program_that_moves_no_tensors_gets_no_map(tmp_path, run_cli):
    (tmp_path / "plain.py").write_text("def f(x):\n    return x + 1\n\nprint(f(1))\n")
    r = run_cli(["discover", "-o", "none.yaml", "plain.py"], cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "2\n"
    assert "no function call carried a tensor or an array while watching; no seam map " \
           "written." in r.stderr
    assert not (tmp_path / "none.yaml").exists()


def test_a_lambda_is_listed_with_the_reason_it_cannot_be_a_target(tmp_path, run_cli):
    (tmp_path / "lam.py").write_text(textwrap.dedent("""
        import torch
        double = lambda t: t * 2  # noqa: E731

        def run():
            return double(torch.ones(8))
    """))
    (tmp_path / "prog.py").write_text("import lam\nimport torch\nlam.double(torch.ones(8))\n")
    r = run_cli(["discover", "-o", "l.yaml", "prog.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ("not a target: lam:<lambda> (1 calls, 64 B/call): a lambda: it has no name a "
            "seam map can patch") in r.stderr
    assert "no candidate can be a seam-map target" in r.stderr
    assert not (tmp_path / "l.yaml").exists()


CHILD_LIB = """
import torch

def work(batch):
    return batch.float().mean(dim=1)
"""

PARENT = """
import multiprocessing as mp
import subprocess
import sys


def child():
    import torch, childlib
    childlib.work(torch.ones(4, 8, dtype=torch.int64))


if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    p.join()
    subprocess.run([sys.executable, "-c",
                    "import torch, childlib; childlib.work(torch.ones(2, 8, dtype=torch.int64))"],
                   check=True)
    import torch, childlib
    # forked pool workers, closed and joined (they leave through os._exit)
    pool = mp.get_context("fork").Pool(2)
    pool.map(childlib.work, [torch.ones(1, 8, dtype=torch.int64)] * 2)
    pool.close()
    pool.join()
"""


@pytest.mark.slow
def test_children_discover_too_and_the_map_merges_them(tmp_path, run_cli):
    # GIVEN a seam that runs only in a spawned and in a subprocess child
    (tmp_path / "childlib.py").write_text(CHILD_LIB)
    (tmp_path / "parent.py").write_text(PARENT)
    r = run_cli(["discover", "--seconds", "600", "-o", "c.yaml", "parent.py"], cwd=tmp_path,
                env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    # THEN every child's calls are in the one map: 4 calls (4x8, 2x8, 1x8, 1x8 int64 in;
    # 4, 2, 1, 1 float32 out), from 3 or 4 processes (a pool may give both tasks to one worker)
    ((calls, b_in, b_out),) = discovered(tmp_path / "c.yaml").values()
    assert (calls, b_in, b_out) == (4, (4 + 2 + 1 + 1) * 8 * 8 / 4, (4 + 2 + 1 + 1) * 4 / 4)
    assert re.search(r"[34] process\(es\)", (tmp_path / "c.yaml").read_text())


TORCHRUN_LIB = """
import torch.distributed as dist

def all_reduce_grads(grads):
    dist.all_reduce(grads)
    return grads / dist.get_world_size()
"""

TORCHRUN_TRAIN = """
import torch, torch.distributed as dist
import trlib
dist.init_process_group("gloo")
for _ in range(2):
    trlib.all_reduce_grads(torch.ones(16, 4) * dist.get_rank())
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_torchrun_ranks_discover_too(tmp_path, run_cli):
    (tmp_path / "trlib.py").write_text(TORCHRUN_LIB)
    (tmp_path / "train.py").write_text(TORCHRUN_TRAIN)
    r = run_cli(["discover", "--seconds", "600", "-o", "t.yaml", "-m", "torch.distributed.run",
                 "--nproc-per-node", "2", "--master-port", "29533", "train.py"], cwd=tmp_path,
                env={"PYTHONPATH": str(tmp_path)}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # two ranks, two calls each, 16x4 float32 in and out; the parent launcher saw none
    assert discovered(tmp_path / "t.yaml") == {"trlib:all_reduce_grads": (4, 256.0, 256.0)}
    assert "2 process(es)" in (tmp_path / "t.yaml").read_text()
    assert ("flowmap: next: flowmap trace --seams t.yaml -m torch.distributed.run "
            "--nproc-per-node 2 --master-port 29533 train.py") in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["discover"], "give a script to discover"),
    (["discover", "nope.py"], "nope.py is not a file"),
    (["discover", "--seconds", "-1", "x.py"], "--seconds takes a positive number, not '-1'"),
    (["discover", "--steps", "many", "x.py"], "--steps takes a positive number, not 'many'"),
    (["discover", "--min-bytes", "lots", "x.py"], "cannot read 'lots' as a size"),
    (["discover", "--include", "no such", "x.py"], "'no such' is not a package name"),
    (["discover", "-o", "no/such/dir/s.yaml", "x.py"], "folder"),
])
def test_bad_arguments_get_one_sentence_and_exit_2(tmp_path, run_cli, args, message):
    (tmp_path / "x.py").write_text("print('ran')\n")
    r = run_cli(args, cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "ran" not in r.stdout


def test_ctrl_c_shows_the_programs_frames_and_says_it_was_interrupted(tmp_path):
    import signal
    import time

    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent("""
        import time
        import torch

        def rollout(x):
            time.sleep(0.02)
            return x * 2

        print("ready", flush=True)
        while True:
            rollout(torch.ones(3))
    """))
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowmap", "discover", "-o", str(tmp_path / "s.yaml"), str(script)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    frames = re.findall(r'File "([^"]+)"', err)
    assert frames[0] == str(script) and not any("flowmap" in f for f in frames), err
    assert "stopped: interrupted (Ctrl-C)" in err and "the program ended" not in err
