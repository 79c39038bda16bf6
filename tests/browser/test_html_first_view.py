"""The first view of the built-in trainer's HTML at 1280x800: the whole flow, legible, header whole.

It used to open at 1:1 and crop the graph on both sides (the rollout engines,
weight sync and a rank were cut off) and to cut the header's facts ("32 sea…").
Now it opens fitted to the panel, never below the scale where owner names still
fit their boxes, with every visible label at 11 CSS px or more; the header
wraps its facts to a line of their own. Measured in real headless Chromium,
on a real trace of examples/grpo_tiny.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from browser.chromium import find_chromium

import flowmap
from flowmap.reporters.html import write_html

pytestmark = pytest.mark.slow

if find_chromium() is None:
    pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINER = os.path.join(ROOT, "examples", "grpo_tiny.py")
WIDTH, HEIGHT = 1280, 800

# Owner boxes drawn outside the graph panel or the window: [name, left, top, right, bottom].
OWNERS_OUTSIDE = """(function () {
  var box = document.getElementById('graph').getBoundingClientRect();
  var left = Math.max(box.left, 0), top = Math.max(box.top, 0);
  var right = Math.min(box.right, window.innerWidth), bottom = Math.min(box.bottom, window.innerHeight);
  return Array.from(document.querySelectorAll('#graph g.owner')).map(function (g) {
    var b = g.querySelector('rect').getBoundingClientRect();
    return [g.querySelector('title').textContent.split('\\n')[0], b.left, b.top, b.right, b.bottom];
  }).filter(function (o) {
    return o[1] < left - 1 || o[2] < top - 1 || o[3] > right + 1 || o[4] > bottom + 1;
  });
})()"""

# Header elements whose text is cut: clipped by their own box, or past the window's edge.
HEADER_CLIPPED = """(function () {
  return Array.from(document.querySelectorAll('#top .stats, #top .warn, #top .brand, #top .controls'))
    .filter(function (e) {
      var b = e.getBoundingClientRect();
      return e.scrollWidth > e.clientWidth + 1 || b.right > window.innerWidth || b.bottom > window.innerHeight;
    }).map(function (e) { return e.className; });
})()"""

VISIBLE_LABEL_PX = """Array.from(document.querySelectorAll('#graph text')).filter(function (t) {
  return getComputedStyle(t).display !== 'none' && getComputedStyle(t.parentNode).display !== 'none';
}).map(function (t) { return [t.textContent, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a]; })"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's run (scripts/demo.sh traces the same trainer; 4 steps give the same graph)."""
    root = tmp_path_factory.mktemp("first_view")
    run_dir = str(root / "run")
    r = subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", run_dir, TRAINER,
                        "--steps", "4", "--seed", "0", "--no-progress"],
                       capture_output=True, text=True, timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr
    run = flowmap.load(run_dir)
    return run, write_html(run.view, root / "demo.html")


def test_the_first_view_shows_every_owner_of_the_demo(browser, demo, tmp_path):
    run, path = demo
    page = browser.open_report(path, width=WIDTH, height=HEIGHT)
    page.screenshot(str(tmp_path / "first-view.png"))  # kept by pytest's tmp_path for a look
    layout_w = page.eval("JSON.parse(document.getElementById('flowmap-data').textContent).run.layout.width")
    panel_w = page.eval("document.getElementById('graph').getBoundingClientRect().width")
    assert layout_w > panel_w  # at 1:1 this graph is cropped: the view had to fit it
    assert page.eval("document.querySelectorAll('#graph g.owner').length") == len(run.view.owners)
    assert page.eval(OWNERS_OUTSIDE) == []
    labels = page.eval(VISIBLE_LABEL_PX)
    owners = {o.split("/")[0] for o in run.view.owners}
    assert {t.rstrip("…").split("/")[0] for t, _ in labels} >= owners  # every owner is named
    assert min(px for _, px in labels) >= 11  # and legibly
    assert page.errors() == []


def test_the_header_is_whole(browser, demo):
    run, path = demo
    page = browser.open_report(path, width=WIDTH, height=HEIGHT)
    assert page.eval(HEADER_CLIPPED) == []
    stats = page.eval("document.querySelector('#top .stats').textContent")
    assert f"{len(run.view.seams)} seams" in stats and f"{len(run.view.owners)} owners" in stats
    # the graph panel still ends inside the window: the taller header took its height from it
    assert page.eval("document.getElementById('graph-panel').getBoundingClientRect().bottom") <= HEIGHT


def test_one_to_one_shows_every_label_and_pans(browser, demo):
    run, path = demo
    page = browser.open_report(path, width=WIDTH, height=HEIGHT)
    page.eval("document.querySelector('.zoom [data-zoom=\"1:1\"]').click()")
    labels = page.eval(VISIBLE_LABEL_PX)
    assert len(labels) == len(run.view.owners) + len(run.view.seams)
    assert min(px for _, px in labels) >= 11
    assert page.eval(OWNERS_OUTSIDE) != []  # at 1:1 this graph is larger than the panel


def test_a_crashed_program_is_said_in_the_header(browser, tmp_path):
    import json

    from browser.runs_html import write_rl_run

    run_dir = write_rl_run(str(tmp_path / "crashed"), steps=2)
    with open(os.path.join(run_dir, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"flowmap": "run", "schema": 1, "exit_code": 1, "started_wall_ns": 10**18,
                   "finished_wall_ns": 10**18 + 11 * 10**9}, f)
    path = write_html(flowmap.load(run_dir).view, tmp_path / "crashed.html")
    page = browser.open_report(str(path), width=WIDTH, height=HEIGHT)
    warning = page.eval("document.getElementById('run-warning').textContent")
    assert "the program failed (exit code 1)" in warning
    assert "11.0 s" in page.eval("document.querySelector('#top .stats').textContent")
    assert page.eval(HEADER_CLIPPED) == []
