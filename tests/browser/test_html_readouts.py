"""The HTML view's readouts in real headless Chromium: hover text, legend, findings, CSV, history."""

from __future__ import annotations

import csv
import io
import urllib.parse
from collections import Counter

import pytest
from browser.chromium import find_chromium
from browser.runs_html import write_rl_run

import flowmap
from flowmap.findings import findings
from flowmap.model.format import fmt_bytes
from flowmap.reporters.html import write_html
from flowmap.units import fmt_count

pytestmark = pytest.mark.slow

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)", allow_module_level=True)


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    run = flowmap.load(write_rl_run(str(root / "rl")))
    return run, write_html(run.view, root / "page.html", layout="layered")


def test_an_edge_hover_reads_bytes_per_step_and_per_hop(browser, page_path):
    run, path = page_path
    page = browser.open_report(path)
    heaviest = next(iter(run.view.seams.values()))
    text = page.eval("document.querySelector('#graph g.seam[data-seam=\"s0\"] > title').textContent")
    label = page.eval("document.querySelector('#seams tr[data-seam=\"s0\"] td.label').textContent")
    s = run.view.seams_by_label[label]
    assert text.startswith(s.label + "\n")
    assert fmt_bytes(s.bytes_per_step_mean) + "/step" in text
    assert fmt_bytes(s.total_bytes / s.hops) + "/hop (mean)" in text
    assert f"p50 {fmt_bytes(s.p50_bytes)}/hop" in text and f"{s.hops} hops" in text
    assert heaviest.hops > 0 and page.errors() == []


def test_the_legend_names_every_role_colour_boxes_share(browser, page_path):
    run, path = page_path
    page = browser.open_report(path)
    roles = page.eval("Array.from(document.querySelectorAll('.legend .role')).map(r => r.dataset.role)")
    # a role several boxes share is keyed; a box alone in its role says it by its own name
    shared = Counter(o.role for o in run.view.owners.values())
    assert sorted(roles) == sorted(r for r, n in shared.items() if n > 1) and roles
    # each swatch is the colour of that role's boxes
    same = page.eval("""Array.from(document.querySelectorAll('.legend .role')).every(function (r) {
      var box = Array.from(document.querySelectorAll('#graph g.owner')).find(function (g) {
        return g.querySelector('text').textContent.split('/')[0] === r.dataset.role; });
      return !box || getComputedStyle(r.querySelector('.swatch')).backgroundColor ===
        getComputedStyle(box.querySelector('rect')).fill; })""")
    assert same


def test_findings_follow_the_search_and_the_step_range(browser, page_path):
    run, path = page_path
    page = browser.open_report(path)
    visible = "document.querySelectorAll('#findings li.finding:not(.hidden)').length"
    total = page.eval("document.querySelectorAll('#findings li.finding').length")
    assert total > 1 and page.eval(visible) == total
    page.eval("(function () { var q = document.getElementById('search'); q.value = 'weight';"
              " q.dispatchEvent(new Event('input')); })()")
    shown = page.eval("Array.from(document.querySelectorAll('#findings li.finding:not(.hidden)'))"
                      ".map(li => li.textContent)")
    expect = [f for f in findings(run.view) if any("weight" in s for s in f.seams)]
    assert 0 < len(shown) == len(expect) < total
    page.eval("(function () { var q = document.getElementById('search'); q.value = 'no such seam';"
              " q.dispatchEvent(new Event('input')); })()")
    assert page.eval(visible) == 0


def test_a_findings_badge_reads_the_figure_its_message_gives(browser, page_path):
    run, path = page_path
    page = browser.open_report(path)
    shown = page.eval("Array.from(document.querySelectorAll('#findings li.finding')).map("
                      "li => [li.querySelector('b').textContent, li.querySelector('.msg').textContent])")
    assert len(shown) == len(findings(run.view)) > 1
    for figure, message in shown:
        assert figure.endswith("/step") and figure in message, (figure, message)


def test_the_leaf_table_exports_as_csv(browser, page_path):
    run, path = page_path
    page = browser.open_report(path, "#seam=s0")
    href = page.eval("document.querySelector('#details a.csv').getAttribute('href')")
    assert href.startswith("data:text/csv;charset=utf-8,")
    rows = list(csv.reader(io.StringIO(urllib.parse.unquote(href.split(",", 1)[1]))))
    label = page.eval("document.querySelector('#seams tr[data-seam=\"s0\"] td.label').textContent")
    s = run.view.seams_by_label[label]
    assert rows[0] == ["path", "kind", "dtype", "shape", "bytes", "max_bytes", "hops"]
    assert [r[0] for r in rows[1:]] == [leaf.path for leaf in s.leaves][: len(rows) - 1]
    assert int(rows[1][5]) == s.leaves[0].max_bytes and int(rows[1][6]) == s.leaves[0].hops


def test_back_and_hash_changes_follow_the_selection(browser, page_path):
    _, path = page_path
    page = browser.open_report(path)
    page.eval("location.hash = '#seam=s1'")
    page.eval("new Promise(r => setTimeout(r, 100))")
    assert page.eval("document.querySelector('#graph g.seam.sel').dataset.seam") == "s1"
    page.eval("document.querySelector('#seams tr[data-seam=\"s2\"]').click()")
    assert page.eval("location.hash") == "#seam=s2"
    page.eval("history.back()")
    page.eval("new Promise(r => setTimeout(r, 200))")
    assert page.eval("location.hash") == "#seam=s1"
    assert page.eval("document.querySelector('#graph g.seam.sel').dataset.seam") == "s1"


def test_the_owner_panel_says_pid(browser, page_path):
    _, path = page_path
    page = browser.open_report(path, "#owner=o0")
    text = page.eval("document.getElementById('details').textContent")
    assert "processes" not in text and ("pid" in text)


def test_a_chart_hover_reads_the_nearest_value(browser, page_path):
    run, path = page_path
    page = browser.open_report(path)
    at = page.eval("""(function () { var s = document.querySelector('#charts svg.chart');
      s.scrollIntoView(); var r = s.getBoundingClientRect();
      return [r.right - 6, r.top + r.height / 2]; })()""")
    page.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": at[0], "y": at[1]})
    text = page.eval("document.querySelector('#charts .chart-box .readout').textContent")
    first = page.eval("Array.from(document.querySelector('#charts .chart-box').querySelectorAll('[data-counter]'))"
                      ".map(k => k.dataset.counter)")
    c = run.view.counters[first[0]]
    # at the right edge: the last sample, as the chart's key prints it
    assert text.startswith(f"{c.name} {fmt_count(c.last)} at "), text
