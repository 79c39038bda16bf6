"""The page names the hosts of a run merged from two hosts whose processes are both pid 1."""

from __future__ import annotations

import json

import pytest
from browser.chromium import find_chromium

import flowmap
from flowmap.read.merge import merge_runs
from flowmap.reporters.html import write_html

pytestmark = pytest.mark.slow

if find_chromium() is None:
    pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)", allow_module_level=True)


def _shard(run_dir, host, me, peer, wall):
    """A rank on `host`, pid 1, sending 4 KiB to its peer at three steps."""
    run_dir.mkdir(parents=True)
    leaf = ["x", "tensor", [8, 128], "float32", "cpu", 4096, 1, None]
    lines = [{"flowmap": "trace", "schema": 1, "pid": 1, "ppid": 0, "host": host, "argv": [],
              "process": None, "t0_mono_ns": 10**9, "t0_wall_ns": wall, "boot_id": host,
              "pid_ns": 1, "start_ticks": 1},
             ["s", 0, me], ["s", 1, peer], ["s", 2, "batch"], ["s", 3, "gloo"], ["s", 4, "x"],
             ["s", 5, "float32"], ["s", 6, "cpu"], ["S", 0, [[4, *leaf[1:3], 5, 6, *leaf[5:]]]]]
    lines += [["h", 1000 * (s + 1), 0, 1, 2, 0, 4096, [s], s, None, 3, None] for s in range(3)]
    (run_dir / f"{host}-1-0000.flowmap.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_the_page_names_both_hosts_and_each_owners_host(browser, tmp_path):
    _shard(tmp_path / "a", "node-a", "rank0", "rank1", 10**18)
    _shard(tmp_path / "b", "node-b", "rank1", "rank0", 10**18 + 10**6)
    merge_runs([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"))
    view = flowmap.load(str(tmp_path / "m")).view
    path = write_html(view, tmp_path / "page.html")
    page = browser.open_report(str(path))
    header = page.eval("document.getElementById('top').textContent")
    assert "2 hosts: node-a, node-b" in header
    owner = next(i for i, name in enumerate(sorted(view.owners)) if name == "rank1")
    page = browser.open_report(str(path), f"#owner=o{owner}")
    details = page.eval("document.getElementById('details').textContent")
    assert "hostnode-b" in details.replace(" ", "")
