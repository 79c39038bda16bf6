"""One way to start tracing: `flowmap trace --seams`, `flowmap.tracing(seams=...)` and the
child each starts (`flowmap.launch.begin`) record the same seams from the same map.

The program (no flowmap import) calls a mapped function itself and in a `subprocess`
child; the child learns the map from its parent's environment only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import flowmap
from flowmap.read.shards import shard_paths

MODULE = """
    def double(x):
        return [v * 2 for v in x]
"""
PROGRAM = """
    import subprocess, sys
    import work

    work.double([1, 2, 3])
    subprocess.run([sys.executable, "-c", "import work; work.double([4, 5])"], check=True)
"""
SEAM_MAP = """
    version: 1
    seams:
      - target: work:double
        owner: doubler
        name: numbers
        result_name: doubled
      - target: work:never_defined
        owner: ghost
"""


def _write(tmp_path) -> str:
    (tmp_path / "work.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "program.py").write_text(textwrap.dedent(PROGRAM))
    (tmp_path / "seams.yaml").write_text(textwrap.dedent(SEAM_MAP))
    return str(tmp_path / "seams.yaml")


def _seen(run_dir: str) -> tuple[dict[tuple[str, str, str], int], dict]:
    run = flowmap.load(run_dir)
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
        meta = json.load(f)
    return {key: s.hops for key, s in run.seams.items()}, meta


def test_the_block_and_the_cli_start_tracing_alike(tmp_path, run_cli):
    seam_map = _write(tmp_path)
    # WHEN the program runs under `flowmap trace --seams`
    cli = run_cli(["trace", "-o", str(tmp_path / "cli"), "--seams", seam_map, "program.py"],
                  cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    # AND the same program runs inside `flowmap.tracing(..., seams=[...])`
    block = textwrap.dedent(f"""
        import os, runpy, flowmap
        with flowmap.tracing({str(tmp_path / "block")!r}, seams=[{seam_map!r}]):
            runpy.run_path("program.py", run_name="__main__")
        print("FLOWMAP_SEAMS" in os.environ)
    """)
    py = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                        text=True, timeout=120)
    assert py.returncode == 0, py.stderr
    assert py.stdout.split() == ["False"]  # the block gave the environment back
    # THEN both hold the call and the result in the parent and in the child (2 hops a seam:
    # the child was armed from the environment its parent exported)
    from_cli, cli_meta = _seen(str(tmp_path / "cli"))
    from_block, block_meta = _seen(str(tmp_path / "block"))
    assert from_cli == from_block
    assert from_cli == {("main", "doubler", "numbers"): 2, ("doubler", "main", "doubled"): 2}
    assert len(shard_paths(str(tmp_path / "block"))) == len(shard_paths(str(tmp_path / "cli"))) == 2
    # and both runs say when they started and ended, and name the target nobody patched
    for meta in (cli_meta, block_meta):
        assert meta["finished_wall_ns"] >= meta["started_wall_ns"] > 0
    for stderr in (cli.stderr, py.stderr):
        assert stderr.count("seam-map target work:never_defined never appeared") == 1, stderr
