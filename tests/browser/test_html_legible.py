"""The HTML graph stays readable in a 1280x800 window: labels are never shrunk below 11 px.

A graph wider than the panel used to be scaled to fit it, so the labels of the
built-in trainer's 13 owners and 32 seams rendered at 5 px. The page opens
fitted (never below half size, where owner names still fit their boxes): below
1:1 every label is drawn larger in the layout so it stays 11 px on screen, and an
edge label that would overlap a box or another label hides; `1:1` shows every
label and pans. Measured in real headless Chromium, from the DOM.
"""

from __future__ import annotations

import pytest
from browser.chromium import find_chromium

import flowmap
from flowmap.reporters.html import write_html

pytestmark = pytest.mark.slow

if find_chromium() is None:
    pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)", allow_module_level=True)

WORKERS = 14
LONG = "rollout_worker_with_a_long_descriptive_name"

# Every visible <text> in the graph: its label and the CSS px its glyphs are drawn at.
RENDERED_LABELS = """Array.from(document.querySelectorAll('#graph text')).filter(function (t) {
  return getComputedStyle(t).display !== 'none' && getComputedStyle(t.parentNode).display !== 'none';
}).map(function (t) {
  return [t.textContent, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a];
})"""


# Pairs of visible graph labels whose boxes on screen overlap.
OVERLAPPING_LABELS = """(function () {
  var ts = Array.from(document.querySelectorAll('#graph text')).filter(function (t) {
    return getComputedStyle(t).display !== 'none' && getComputedStyle(t.parentNode).display !== 'none';
  }).map(function (t) { return [t.textContent, t.getBoundingClientRect()]; });
  var out = [];
  ts.forEach(function (a, i) { ts.slice(i + 1).forEach(function (b) {
    var r = a[1], q = b[1];
    if (r.left < q.right && q.left < r.right && r.top < q.bottom && q.top < r.bottom) out.push([a[0], b[0]]);
  }); });
  return out;
})()"""


def _wide_run(path: str) -> str:
    """A driver fanning out to many workers: wider than any 1280-px panel at 1:1."""
    with flowmap.tracing(path, children=False):
        for step in range(2):
            flowmap.step(step)
            for w in range(WORKERS):
                worker = f"{LONG}/{w}" if w == 0 else f"rollout/{w}"
                flowmap.hop("driver", worker, {"prompts": bytes(64)}, name="prompts_for_generation_round")
                flowmap.hop(worker, "learner", {"tokens": bytes(4096)}, name="trajectories")
    return path


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("legible")
    run = flowmap.load(_wide_run(str(root / "wide")))
    return run, write_html(run.view, root / "wide.html", layout="layered")


def test_every_visible_label_is_at_least_11_css_px_at_1280x800(browser, page_path):
    run, path = page_path
    page = browser.open_report(path)
    layout_w = page.eval("JSON.parse(document.getElementById('flowmap-data').textContent).run.layout.width")
    panel_w = page.eval("document.getElementById('graph').getBoundingClientRect().width")
    assert layout_w > panel_w  # the graph does not fit: fitting it would shrink the labels
    labels = page.eval(RENDERED_LABELS)
    assert len(labels) >= WORKERS + 2  # every owner named at the first view
    small = [(text, round(px, 2)) for text, px in labels if px < 11]
    assert small == []
    page.eval("document.querySelector('.zoom [data-zoom=\"1:1\"]').click()")
    labels = page.eval(RENDERED_LABELS)
    assert len(labels) == WORKERS + 2 + len(run.view.seams)  # every owner, every seam
    assert [(text, round(px, 2)) for text, px in labels if px < 11] == []
    assert page.errors() == []


def test_long_names_are_cut_on_the_graph_and_whole_on_hover(browser, page_path):
    _, path = page_path
    page = browser.open_report(path)
    owners = page.eval("Array.from(document.querySelectorAll('#graph g.owner')).map("
                       "g => [g.querySelector('text').textContent, g.querySelector('title').textContent])")
    [(shown, title)] = [o for o in owners if o[1].startswith(LONG)]
    # cut in the middle: the instance's "/0" stays, so rollout workers /0, /1, /2 read apart
    assert "…" in shown and shown.endswith("/0") and len(shown) < len(LONG) and title.startswith(f"{LONG}/0\n")
    edges = page.eval("Array.from(document.querySelectorAll('#graph g.seam')).map("
                      "g => [g.querySelector('tspan').textContent, g.querySelector('title').textContent])")
    cut = [e for e in edges if e[1].split("\n")[0].endswith(": prompts_for_generation_round")]
    assert len(cut) == WORKERS and all(e[0].endswith("…") for e in cut)


def test_fit_shows_the_whole_graph_without_unreadable_labels(browser, page_path):
    run, path = page_path
    page = browser.open_report(path)
    page.eval("document.querySelector('.zoom [data-zoom=\"fit\"]').click()")
    inside = page.eval("""(function () {
      var box = document.getElementById('graph').getBoundingClientRect();
      return Array.from(document.querySelectorAll('#graph g.owner rect')).every(function (r) {
        var b = r.getBoundingClientRect();
        return b.left >= box.left - 1 && b.right <= box.right + 1 && b.top >= box.top - 1 && b.bottom <= box.bottom + 1;
      });
    })()""")
    assert inside
    labels = page.eval(RENDERED_LABELS)
    # edge labels are drawn at 11 px too, where they overlap nothing; the rest hide, counted
    assert labels and min(px for _, px in labels) >= 11  # owner names keep their size
    assert page.eval(OVERLAPPING_LABELS) == []
    hidden = page.eval("document.querySelectorAll('#graph text.elabel.crowded').length")
    assert len(labels) + hidden == WORKERS + 2 + len(run.view.seams)
    note = page.eval("document.getElementById('crowd-note').textContent")
    assert note.startswith(f"{hidden} of {len(run.view.seams)} edge labels hidden") if hidden else note == ""
    page.eval("document.querySelector('.zoom [data-zoom=\"1:1\"]').click()")
    assert min(px for _, px in page.eval(RENDERED_LABELS)) >= 11
    assert len(page.eval(RENDERED_LABELS)) == WORKERS + 2 + len(run.view.seams)  # every label


def test_a_seam_selected_off_screen_is_panned_into_view(browser, page_path):
    _, path = page_path
    page = browser.open_report(path)
    page.eval("document.querySelector('.zoom [data-zoom=\"1:1\"]').click()")
    offscreen = page.eval("""(function () {
      var box = document.getElementById('graph').getBoundingClientRect();
      return Array.from(document.querySelectorAll('#graph g.seam')).filter(function (g) {
        var r = g.querySelector('text').getBoundingClientRect();
        return r.right < box.left || r.left > box.right || r.bottom < box.top || r.top > box.bottom;
      }).map(g => g.dataset.seam);
    })()""")
    assert offscreen  # at 1:1 part of this graph is outside the panel
    page.eval(f"document.querySelector('#seams tr[data-seam=\"{offscreen[0]}\"]').click()")
    visible = page.eval(f"""(function () {{
      var box = document.getElementById('graph').getBoundingClientRect();
      var r = document.querySelector('#graph g.seam[data-seam="{offscreen[0]}"] text').getBoundingClientRect();
      return r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom;
    }})()""")
    assert visible
