"""The first view labels every arrow it draws, even where two dozen of them cross.

open-thought/tiny-grpo traced with `flowmap trace` alone draws 24 arrows between 15 owners;
its first view at 1280x800 used to hide all 24 labels (at 11 px each overlapped another
label or a box where the layout had kept it room). Now the layout wraps its layers at the
width that opens largest in the panel and takes the panel's height, and each label looks for
a free place on its own arrow. Measured in real headless Chromium on the public GRPO scripts
(tests/integration/public_scripts/, each with its SOURCE.md), each traced for real:

- every arrow drawn shows its label (its name and the Flow table's figure), on its own line;
- no two boxes or labels overlap, no text under 11 CSS px, every owner inside the graph panel;
- zoomed out until labels no longer fit, those hidden are exactly the number the legend says.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from browser.chromium import find_chromium
from test_html_pipeline_view import MEASURE, layout_faults

import flowmap
from flowmap.reporters.html import write_html

pytestmark = pytest.mark.slow

if find_chromium() is None:
    pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PUBLIC = os.path.join(ROOT, "tests", "integration", "public_scripts")
SCRIPTS = {
    "tiny_grpo_openthought": (os.path.join(PUBLIC, "tiny_grpo_openthought", "train.py"), ["--steps", "3"]),
    "tiny_grpo_fangyuan": (os.path.join(PUBLIC, "tiny_grpo_fangyuan", "train.py"), []),
}
WIDTH, HEIGHT = 1280, 800

# Each drawn arrow whose label shows: whether some point of its own line lies within `near`
# CSS px of the label's box.
ON_OWN_LINE = """(function (near) {
  return Array.from(document.querySelectorAll('#graph g.flow-edge')).filter(function (g) {
    return getComputedStyle(g.querySelector('text')).display !== 'none';
  }).map(function (g) {
    var p = g.querySelector('path.line'), n = p.getTotalLength(), m = p.getScreenCTM();
    var r = g.querySelector('text').getBoundingClientRect(), hit = false;
    for (var i = 0; i <= 400 && !hit; i++) {
      var q = p.getPointAtLength(n * i / 400), x = q.x * m.a + m.e, y = q.y * m.d + m.f;
      hit = x > r.left - near && x < r.right + near && y > r.top - near && y < r.bottom + near;
    }
    return [g.querySelector('tspan').textContent, hit];
  });
})(10)"""


def overlap(a: list[float], b: list[float]) -> bool:
    """Two [left, top, right, bottom] boxes share more than half a pixel each way."""
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each script traced the first time a test asks for it, with no seam map."""
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("edge_labels")
    made: dict[str, tuple] = {}

    def page(name: str):
        if name not in made:
            script, args = SCRIPTS[name]
            run_dir = str(root / name)
            r = subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", run_dir, script, *args],
                               capture_output=True, text=True, timeout=300, cwd=root)
            assert r.returncode == 0, r.stderr[-3000:]
            run = flowmap.load(run_dir)
            made[name] = (run, write_html(run.view, root / f"{name}.html"))
        return made[name]

    return page


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_every_arrow_of_a_public_grpo_script_is_labelled_on_the_first_view(browser, pages, name, tmp_path):
    run, path = pages(name)
    page = browser.open_report(path, width=WIDTH, height=HEIGHT)
    page.screenshot(str(tmp_path / f"{name}.png"))  # kept by pytest's tmp_path for a look
    m = page.eval(MEASURE)
    assert page.errors() == []
    assert len(m["owners"]) == len(run.view.owners)
    assert layout_faults(m) == {"outside": [], "name_cut": [], "boxes_overlap": [], "labels_overlap": [],
                                "label_on_box": [], "small": []}
    arrows = [lb for lb in m["labels"] if lb["flow"]]
    assert len(arrows) == len(m["data"]["flow"]["edges"]) >= (20 if name == "tiny_grpo_openthought" else 6)
    assert [lb["name"] for lb in arrows if not lb["shown"]] == []  # every arrow's label shows
    assert all(lb["figure"] == m["flowRows"][lb["flow"]] for lb in arrows)  # the Flow table's figure
    assert "edge labels hidden" not in m["legend"]
    placed = page.eval(ON_OWN_LINE)
    assert len(placed) == len(arrows) and [t for t, on in placed if not on] == []


def test_zoomed_out_the_legend_counts_the_labels_that_hide(browser, pages):
    _, path = pages("tiny_grpo_openthought")
    page = browser.open_report(path, width=WIDTH, height=HEIGHT)
    for _ in range(5):  # a third of the opening size: the boxes stay, labels no longer all fit
        page.eval("document.querySelector('.zoom [data-zoom=\"−\"]').click()")
    m = page.eval(MEASURE)
    arrows = [lb for lb in m["labels"] if lb["flow"]]
    hidden = [lb for lb in arrows if not lb["shown"]]
    assert 0 < len(hidden) < len(arrows)  # some still show, each on a free place
    assert f"{len(hidden)} of {len(arrows)} edge labels hidden where they would overlap" in m["legend"]
    # the labels still shown overlap nothing (the owners' names, drawn at 11 px below the
    # zoom their boxes were sized for, may now overrun their boxes: not what is measured here)
    shown = [lb for lb in arrows if lb["shown"]]
    others = [o["rect"] for o in m["owners"]] + [o["label"] for o in m["owners"]]
    assert [(a["name"], b["name"]) for i, a in enumerate(shown) for b in shown[i + 1:]
            if overlap(a["rect"], b["rect"])] == []
    assert [lb["name"] for lb in shown if any(overlap(lb["rect"], r) for r in others)] == []
    assert min(lb["px"] for lb in shown) >= 11
