"""A regular install works as the editable one does: the built wheel traces children.

The other tests run against an editable install, which reads the source tree and
so hides anything the wheel leaves out. Here the wheel is built from a copy of the
tree, installed into a fresh venv (no system site-packages, no torch), and a
traced program's spawned child must leave its own shard with its hop.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

import flowmap

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What the built-in trace needs beyond the Python modules: the child boot file and
# the data files the renderers and presets read.
MUST_SHIP = [
    "flowmap/launch/boot/sitecustomize.py",
    "flowmap/py.typed",
    "flowmap/reporters/assets/flowmap.js",
    "flowmap/reporters/assets/graph.js",
    "flowmap/reporters/assets/details.js",
    "flowmap/reporters/assets/charts.js",
    "flowmap/reporters/assets/flowmap.css",
    "flowmap/seams/presets/trl.yaml",
    "flowmap/model/presets/deepseek-v3.yaml",
    "flowmap/cli/main.py",
    "flowmap/trainer/__init__.py",
]
# setuptools' own packaging complaints (`Package 'x' is absent from the packages
# configuration`, deprecated config); distutils' "byte-compiling is disabled" is not one.
PACKAGING_WARNINGS = ("_Warning", "Deprecat", "absent from", "!!")

CHILD_SCRIPT = """
    import multiprocessing as mp
    import flowmap

    def child():
        flowmap.hop("child/0", "main", b"x" * 1234, name="from_child")

    if __name__ == "__main__":
        p = mp.get_context("spawn").Process(target=child)
        p.start(); p.join()
        assert p.exitcode == 0, p.exitcode
        flowmap.hop("main", "main", 1, name="done")
"""


def _copy_tree(dst: Path) -> Path:
    """The source a clean checkout would have, without this tree's venv and build litter."""
    src = dst / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "flowmap-runs", "*.flowmap",
        "*.so",  # the C loops an editable install built in place: the wheel compiles its own
    ))
    return src


def _run(args: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(wheel, venv) for one build and one install shared by the tests of this module."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy_tree(tmp)
    build = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp / "dist"),
                  str(src)])
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    warnings = [line for line in (build.stdout + build.stderr).splitlines()
                if any(w in line for w in PACKAGING_WARNINGS)]
    assert warnings == [], "\n".join(warnings)
    (wheel,) = (tmp / "dist").glob("flowmap_rl-*.whl")
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    install = _run([str(py), "-m", "pip", "install", "-q", str(wheel)])
    assert install.returncode == 0, install.stderr[-3000:]
    return wheel, env_dir


def test_the_wheel_ships_the_boot_file_and_the_data_files(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [n for n in MUST_SHIP if n not in names]
    assert missing == []
    # one import root: trainer/ and cli/ only under flowmap/
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"flowmap"}


def test_a_spawned_child_is_traced_after_a_regular_install(installed, tmp_path):
    _, env_dir = installed
    script = tmp_path / "kids.py"
    script.write_text(textwrap.dedent(CHILD_SCRIPT))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = _run([str(env_dir / "bin" / "flowmap"), "trace", "-o", str(tmp_path / "run"), str(script)],
             cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    # the program ran from the venv's copy, not from this source tree
    where = _run([str(env_dir / "bin" / "python"), "-c",
                  "import flowmap.capture.session as s; print(s.BOOT_DIR)"], cwd=tmp_path, env=env)
    assert where.stdout.strip().startswith(str(env_dir))
    run = flowmap.load(tmp_path / "run")
    by_name = {h.name: h for h in run.hops}
    assert set(by_name) == {"from_child", "done"}
    assert by_name["from_child"].nbytes == 1234
    assert by_name["from_child"].pid != by_name["done"].pid
    # the child's own shard
    child_pid = by_name["from_child"].pid
    assert len(list((tmp_path / "run").glob(f"*-{child_pid}-*.flowmap.jsonl"))) == 1


def test_the_cli_entry_point_runs_from_the_wheel(installed, tmp_path):
    _, env_dir = installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = _run([str(env_dir / "bin" / "flowmap"), "--help"], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    for verb in ("trace", "report", "render", "check"):
        assert verb in r.stdout
    trainer = _run([str(env_dir / "bin" / "python"), "-c",
                    "import flowmap.trainer, flowmap.cli.main as m; print(m.__file__)"],
                   cwd=tmp_path, env=env)
    assert trainer.returncode == 0, trainer.stderr
    assert trainer.stdout.strip().startswith(str(env_dir))


def test_the_wheel_carries_the_c_loops_and_capture_uses_them(installed, tmp_path):
    """This machine has a compiler: the regular install runs capture's hot loops in C."""
    wheel, env_dir = installed
    for module in ("capture/describers/cwalk", "capture/describers/ccolumns", "writer/cids",
                   "discover/crelay"):
        assert any(n.startswith(f"flowmap/{module}.") and n.endswith(".so")
                   for n in zipfile.ZipFile(wheel).namelist()), module
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "FLOWMAP_PURE_PYTHON")}
    r = _run([str(env_dir / "bin" / "python"), "-c",
              "from flowmap.capture.describers import accel; "
              "print(accel.tensor_entries is not None, accel.disjoint_total([(0, 4, 4), (8, 9, 1)]), "
              "accel.fold_columns(['ab', 'c'], '[*]', 1, lambda t: None)); "
              "import weakref; from flowmap.writer import encoder, storage_table; held = encoder.TraceWriter; "
                  "print(storage_table.known_ids({5: ('0', weakref.ref(held))}, [5, 5]))"],
             cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    first, ids = r.stdout.strip().splitlines()
    assert first.split(maxsplit=2) == ["True", "5",
                                       "([('[*]', 'str', ((1, 2),), '', '', 3, 2, None)], 1, 2, [], 0, 3)"]
    assert ids == "0,0"  # the writer's C twin


def test_from_the_source_trees_root_the_installed_names_resolve(installed):
    """Run from a checkout's root, Python imports the checkout's `flowmap/` before the installed
    one; `flowmap.trainer` and `flowmap.cli` must still resolve (to the checkout's folders)."""
    wheel, env_dir = installed
    src = wheel.parent.parent / "src"  # the tree the wheel was built from (`_copy_tree`)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = _run([str(env_dir / "bin" / "python"), "-c",
              "import flowmap, flowmap.trainer, flowmap.cli.main as m; "
              "print(flowmap.__file__); print(flowmap.trainer.__file__); print(m.__file__)"],
             cwd=src, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(src / "flowmap" / "__init__.py"),
                                str(src / "trainer" / "__init__.py"), str(src / "cli" / "main.py")]
