"""The HTML view in a real headless Chromium: it loads clean, offline, shows every seam, reacts to clicks.

Chromium is driven over the DevTools protocol on a pipe (see `chromium.py`).
Skipped, saying why, where no Chromium is installed; CI installs one.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading

import pytest
from browser.chromium import find_chromium
from browser.runs_html import HOSTILE, HOSTILE_SCRIPT, write_rl_run

import flowmap
from flowmap.reporters.html import write_html
from flowmap.reporters.html_data import html_document

pytestmark = pytest.mark.slow

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)", allow_module_level=True)

# A point on the seam's edge that the mouse would really hit (not covered by another shape).
CLICKABLE_POINT = """
(function (id) {
  var g = document.querySelector('#graph [data-seam="' + id + '"]');
  g.focus({ focusVisible: true });  // as Tab does: the graph pans to a seam outside the panel
  var hit = g.querySelector('path.hit'), len = hit.getTotalLength(), m = hit.getScreenCTM();
  var fractions = [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.15, 0.85, 0.1, 0.9];
  for (var i = 0; i < fractions.length; i++) {
    var p = hit.getPointAtLength(len * fractions[i]);
    var x = p.x * m.a + p.y * m.c + m.e, y = p.x * m.b + p.y * m.d + m.f;
    var top = document.elementFromPoint(x, y);
    if (top && top.closest('[data-seam]') === g) return [x, y];
  }
  var r = g.querySelector('text.elabel').getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
})(%s)
"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The RL run rendered with each layout engine, and a run full of hostile names."""
    root = tmp_path_factory.mktemp("html")
    run = flowmap.load(write_rl_run(str(root / "rl")))
    hostile = flowmap.load(write_rl_run(str(root / "hostile"), steps=2, hostile=True))
    return {
        "run": run,
        "hostile_run": hostile,
        "auto": write_html(run.view, root / "auto.html"),
        "layered": write_html(run.view, root / "layered.html", layout="layered"),
        "hostile": write_html(hostile.view, root / "hostile.html", layout="layered"),
    }


def open_page(browser, path, fragment=""):
    page = browser.new_page(1600, 1000)
    url = "file://" + os.path.abspath(path) + fragment
    page.goto(url)
    assert page.eval("document.body.getAttribute('data-ready')") == "1", page.errors()
    return page, url


@pytest.mark.parametrize("engine", ["auto", "layered"])
def test_page_loads_without_console_errors_or_network_requests(browser, pages, engine):
    page, url = open_page(browser, pages[engine])
    assert page.errors() == []
    assert page.requests() == [url]
    # auto: dot where installed and its layout reads at 1280x800, else the layered one
    expected = "layered" if engine == "layered" or not _has_dot() else \
        html_document(pages["run"].view, "auto")["run"]["layout"]["engine"]
    assert page.eval("JSON.parse(document.getElementById('flowmap-data').textContent).run.layout.engine") == expected


@pytest.mark.parametrize("engine", ["auto", "layered"])
def test_every_seam_is_drawn_and_listed(browser, pages, engine):
    page, _ = open_page(browser, pages[engine])
    labels = sorted(s.label for s in pages["run"].seams.values())
    drawn = page.eval("Array.from(document.querySelectorAll('#graph g.seam title')).map(t => t.textContent.split('\\n')[0])")
    listed = page.eval("Array.from(document.querySelectorAll('#seams tbody td.label')).map(t => t.textContent)")
    assert sorted(drawn) == labels and sorted(listed) == labels
    owners = page.eval("Array.from(document.querySelectorAll('#graph g.owner > text')).map(t => t.textContent)")
    assert set(owners) >= set(pages["run"].owners)
    assert page.eval("document.querySelectorAll('#charts figure').length") == 5  # in-flight+watermark, 4 more


def test_clicking_each_seam_shows_its_details(browser, pages):
    page, _ = open_page(browser, pages["auto"])
    by_label = {s.label: s for s in pages["run"].seams.values()}
    ids = page.eval("Array.from(document.querySelectorAll('#graph g.seam')).map(g => g.dataset.seam)")
    data = {s["id"]: s for s in page.eval("JSON.parse(document.getElementById('flowmap-data').textContent).seams")}
    for sid in ids:
        x, y = page.eval(CLICKABLE_POINT % json.dumps(sid))
        page.click(x, y)
        title = page.eval("document.querySelector('#details h2').textContent")
        assert title == "seam" + data[sid]["label"], sid
        shown_paths = page.eval("Array.from(document.querySelectorAll('#details table.leaves td.mono:first-child')).map(t => t.textContent)")
        stats = by_label[data[sid]["label"]]
        assert shown_paths == [leaf.path or "(payload)" for leaf in stats.leaves]
        assert page.eval("document.querySelectorAll('#details svg.hist rect').length") >= 1
        assert page.eval("document.querySelector('#graph g.seam.sel').dataset.seam") == sid
    assert page.errors() == []


def test_clicking_an_owner_shows_bytes_in_and_out(browser, pages):
    page, _ = open_page(browser, pages["layered"])
    box = page.eval("""(function () {
      var g = Array.from(document.querySelectorAll('#graph g.owner')).find(g => g.textContent.startsWith('ready_buffer'));
      var r = g.querySelector('rect').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2];
    })()""")
    page.click(*box)
    details = page.eval("document.getElementById('details').textContent")
    assert details.startswith("ownerready_buffer") and "bytes in" in details and "bytes out" in details
    assert "over the whole run" in details  # totals, where seams are per step: the unit is said
    assert "from rollout/0 : trajectory" in details and "to batcher : trajectories" in details


def test_step_filter_and_search_narrow_the_view(browser, pages):
    page, _ = open_page(browser, pages["auto"], "#seam=s0")
    before = page.eval("document.querySelector('#graph g.seam[data-seam=\"s3\"] text').textContent")
    page.eval("""(function () {
      var to = document.getElementById('step-to'); to.value = 0; to.dispatchEvent(new Event('input'));
    })()""")
    assert page.eval("document.getElementById('step-label').textContent").startswith("step 0 of 0")
    assert page.eval("document.querySelector('#graph g.seam[data-seam=\"s3\"] text').textContent") != before
    page.eval("""(function () {
      var q = document.getElementById('search'); q.value = 'weight'; q.dispatchEvent(new Event('input'));
    })()""")
    visible = page.eval("Array.from(document.querySelectorAll('#seams tbody tr:not(.hidden) td.label')).map(t => t.textContent)")
    assert visible and all("weight" in v for v in visible)
    assert page.errors() == []


def test_screenshot_is_written(browser, pages, tmp_path):
    page, _ = open_page(browser, pages["auto"], "#seam=s3")
    out = page.screenshot(str(tmp_path / "flowmap.png"))
    with open(out, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(out) > 20_000


def test_hostile_names_stay_text(browser, pages):
    page, _ = open_page(browser, pages["hostile"])
    assert page.dialogs() == [] and page.errors() == []
    assert page.eval("document.querySelectorAll('img').length") == 0
    assert page.eval("document.scripts.length") == 2
    assert page.eval("typeof window.__flowmap_pwned") == "undefined"
    listed = page.eval("Array.from(document.querySelectorAll('#seams tbody td.label')).map(t => t.textContent)")
    assert f"{HOSTILE} -> driver : {HOSTILE_SCRIPT}" in listed
    body = page.eval("document.body.textContent")
    assert HOSTILE in body and HOSTILE_SCRIPT in body
    sid = page.eval("Array.from(document.querySelectorAll('#graph g.seam')).find(g => g.textContent.includes('onerror')).dataset.seam")
    page.click(*page.eval(CLICKABLE_POINT % json.dumps(sid)))
    assert page.eval("document.querySelectorAll('img').length") == 0 and page.dialogs() == []


def test_served_over_loopback_the_page_asks_for_nothing_but_itself(browser, pages):
    # Over http the browser would fetch /favicon.ico or any asset it found; the server sees only the page.
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            seen.append(self.path)

    root = os.path.dirname(pages["auto"])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        url = f"http://127.0.0.1:{server.server_address[1]}/auto.html"
        page.goto(url)
        assert page.eval("document.body.getAttribute('data-ready')") == "1"
        assert page.requests() == [url] and page.errors() == []
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["/auto.html"]


def _has_dot() -> bool:
    import shutil

    return shutil.which("dot") is not None
