"""The HTML page: self-contained, escaped, deterministic, bounded; its data matches the run."""

from __future__ import annotations

import json
import math
import os
import re

import pytest
from browser.runs_html import HOSTILE, HOSTILE_SCRIPT, synthetic_run, write_rl_run

import flowmap
from flowmap.errors import FlowmapError, UsageError
from flowmap.model.run import Run
from flowmap.read.reader import CounterSample, Shard
from flowmap.reporters.html import embed_json, render_html, write_html
from flowmap.reporters.html_data import (
    chart_groups,
    downsample,
    html_document,
    size_histogram,
)

ASSETS = os.path.join(os.path.dirname(flowmap.__file__), "reporters", "assets")


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("rl") / "run"), hostile=True))


def embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="flowmap-data">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


# --- self-contained and safe -----------------------------------------------------------


def test_page_makes_no_reference_to_anything_outside_itself(rl_run):
    # GIVEN a rendered run WHEN we look for URLs and resource attributes THEN none leave the file
    page = render_html(rl_run.view, layout="layered")
    urls = set(re.findall(r"https?://[^\s\"')]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace name, never fetched
    assert re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page) == ["data:,"]
    assert "@import" not in page and "@font-face" not in page
    assert "default-src 'none'" in page  # and the browser is told to refuse any request


def test_hostile_names_cannot_end_the_data_element(rl_run):
    page = render_html(rl_run.view)
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<img" not in page
    assert "\u2028" not in page and "\u2029" not in page
    data = embedded(page)
    labels = {s["label"] for s in data["seams"]}
    assert f"{HOSTILE} -> driver : {HOSTILE_SCRIPT}" in labels
    assert HOSTILE in {o["name"] for o in data["owners"]}
    assert HOSTILE_SCRIPT in {c["name"] for c in data["counters"]}
    leaf_paths = {leaf["path"] for s in data["seams"] for leaf in s["leaves"]}
    assert "x\u2028y" in leaf_paths  # escaped in the file, intact after JSON.parse


def test_embed_json_escapes_every_character_that_matters_in_a_script_element():
    text = embed_json({"k": "</script><!-- & \u2028\u2029 >"})
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"k": "</script><!-- & \u2028\u2029 >"}


def test_script_writes_text_never_markup():
    from flowmap.reporters.html import _script

    js = _script()  # flowmap.js with its parts (graph.js, details.js, charts.js) included
    live = _script(live=True)  # the page `flowmap serve` sends: live.js too
    parts = [n for n in os.listdir(ASSETS) if n.endswith(".js") and n != "flowmap.js"]
    assert parts and "/* @include" not in js and "/* @include" not in live
    for name in parts:
        with open(os.path.join(ASSETS, name), encoding="utf-8") as f:
            text = f.read().rstrip("\n")
        assert text in live, name
        assert (text in js) == (name != "live.js"), name
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                   "new Function", "fetch(", "XMLHttpRequest", "import("):
        assert banned not in js, banned
        # the live page fetches its data from the server that sent it, and nothing else
        assert banned not in live or banned == "fetch(", banned
    assert live.count("fetch(") == 1 and 'fetch("data.json?after=" + ' in live


def test_the_page_runs_only_the_script_whose_hash_it_declares(rl_run):
    import base64
    import hashlib

    page = render_html(rl_run.view)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page


# --- deterministic ---------------------------------------------------------------------


def test_same_run_gives_byte_identical_html(rl_run, tmp_path):
    again = flowmap.load(rl_run.path)
    assert render_html(rl_run.view) == render_html(again.view)
    assert render_html(rl_run.view, layout="layered") == render_html(again.view, layout="layered")


# --- layout engines --------------------------------------------------------------------


def test_forced_fallback_layout_places_every_owner_and_seam(rl_run):
    data = html_document(rl_run.view, "layered")
    assert data["run"]["layout"]["engine"] == "layered"
    assert all(len(s["path"]) >= 8 and (len(s["path"]) // 2 - 1) % 3 == 0 for s in data["seams"])


def test_no_dot_on_path_falls_back_to_the_built_in_layout(rl_run, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert html_document(rl_run.view, "auto")["run"]["layout"]["engine"] == "layered"


@pytest.mark.skipif(not __import__("shutil").which("dot"), reason="Graphviz `dot` is not installed")
def test_graphviz_lays_out_the_graph_when_installed(rl_run):
    data = html_document(rl_run.view, "auto")
    assert data["run"]["layout"]["engine"] == "dot"
    assert all((len(s["path"]) // 2 - 1) % 3 == 0 for s in data["seams"])


def test_unknown_layout_is_a_usage_error(rl_run):
    with pytest.raises(UsageError):
        render_html(rl_run.view, layout="circo")


# --- the data matches the run ----------------------------------------------------------


def test_every_seam_and_owner_is_in_the_page_with_its_figures(rl_run):
    data = html_document(rl_run.view, "layered")
    assert [s["label"] for s in data["seams"]] == [s.label for s in rl_run.seams.values()]
    assert {o["name"] for o in data["owners"]} >= set(rl_run.owners)
    for s, stats in zip(data["seams"], rl_run.seams.values()):
        assert sum(s["bin_bytes"]) == stats.total_bytes
        assert sum(s["bin_hops"]) == stats.hops
        assert sum(s["hist"]["counts"]) + s["hist"]["zero"] == stats.hops
        assert [leaf["path"] for leaf in s["leaves"]] == [leaf.path for leaf in stats.leaves]
    assert sum(b[2] for b in data["bins"]) == len(rl_run.steps)


def test_the_rl_loop_is_marked_where_weights_go_back_to_rollout(rl_run):
    data = html_document(rl_run.view, "layered")
    back = {s["label"] for s in data["seams"] if s["back"]}
    assert "weight_sync -> rollout/0 : weights" in back
    assert "rollout/0 -> ready_buffer : trajectory" not in back


def test_owners_are_laid_out_from_the_sources_down(rl_run):
    order = rl_run.view.order
    assert order.index("dataset") < order.index("driver") < order.index("rollout/0") < order.index("weight_sync")
    data = html_document(rl_run.view, "layered")
    y = {o["name"]: o["y"] for o in data["owners"]}
    assert y["dataset"] < y["driver"] < y["ready_buffer"] < y["trainer/rank0"] < y["weight_sync"]


def test_dynamic_dims_keep_their_range(rl_run):
    data = html_document(rl_run.view, "layered")
    traj = next(s for s in data["seams"] if s["label"] == "rollout/0 -> ready_buffer : trajectory")
    experts = next(leaf for leaf in traj["leaves"] if leaf["path"] == "routed_experts")
    assert isinstance(experts["shape"][0], list) and experts["shape"][1:] == [4, 2]
    assert experts["dims"] == ["tokens", "layers", "topk"]
    assert traj["residency_mean_s"] is not None and traj["transports"] == {"pickle": 24}


def test_in_flight_and_watermark_share_the_first_chart(rl_run):
    data = html_document(rl_run.view, "layered")
    assert data["charts"][0] == ["in_flight", "target_watermark"]
    assert [g[0] for g in data["charts"][1:5]] == ["ready_buffer_depth", "staleness_max", "reward_mean", "loss"]


def test_findings_point_at_seams_of_the_page(rl_run):
    data = html_document(rl_run.view, "layered")
    ids = {s["id"] for s in data["seams"]}
    assert data["findings"]
    assert all(f["seams"] and set(f["seams"]) <= ids and f["message"] for f in data["findings"])


# --- edge cases ------------------------------------------------------------------------


def _bare_run(counters=()) -> Run:
    shard = Shard("x.jsonl", 1, 0, "h", [], None, 0, 0, counters=list(counters), truncated=False)
    return Run("empty", [shard], {})


def test_a_run_without_hops_still_renders():
    data = embedded(render_html(_bare_run().view))
    assert data["seams"] == [] and data["bins"] == [[None, None, 1, None, None]]


def test_non_finite_counter_values_become_gaps_not_invalid_json():
    samples = [CounterSample(i, 1, "loss", v, "trainer") for i, v in enumerate([1.0, math.nan, math.inf, 2.0])]
    data = embedded(render_html(_bare_run(samples).view))
    assert data["counters"][0]["v"] == [1, None, None, 2]


def test_write_html_defaults_into_the_run_directory(rl_run, tmp_path):
    assert write_html(rl_run.view) == os.path.join(rl_run.path, "flowmap.html")
    out = write_html(rl_run.view, tmp_path / "page.html")
    assert out == str(tmp_path / "page.html") and os.path.getsize(out) > 10_000
    with pytest.raises(FlowmapError, match="does not exist"):  # no folder is created silently
        write_html(rl_run.view, tmp_path / "sub" / "page.html")
    assert not (tmp_path / "sub").exists()


def test_unwritable_path_is_one_clear_error(rl_run, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(FlowmapError, match="is a file, not a folder"):
        write_html(rl_run.view, tmp_path / "file" / "page.html")


# --- bounded size ----------------------------------------------------------------------


def test_downsample_keeps_the_extremes_and_the_bound():
    series = [(float(i), float(i % 97)) for i in range(100_000)]
    series[55_555] = (55_555.0, 1e9)
    out = downsample(series, 800)
    assert len(out) <= 800
    assert max(v for _, v in out) == 1e9 and min(v for _, v in out) == 0
    assert [t for t, _ in out] == sorted(t for t, _ in out)


def test_size_histogram_buckets_by_powers_of_two():
    assert size_histogram([0, 1, 3, 4, 7, 1024]) == {"lo": 0, "counts": [1, 1, 2] + [0] * 7 + [1], "zero": 1}
    assert size_histogram([]) == {"lo": 0, "counts": [], "zero": 0}


def test_chart_groups_without_watermark():
    assert chart_groups(["kv_blocks", "loss"]) == [["loss"], ["kv_blocks"]]


@pytest.mark.slow
def test_a_million_hops_render_within_two_megabytes(tmp_path):
    # GIVEN a 1,000,000-hop run WHEN written through the real write_html path THEN the page stays small
    run = synthetic_run(1_000_000)
    out = write_html(run.view, tmp_path / "big.html")
    size = os.path.getsize(out)
    assert size <= 2_000_000, f"{size} bytes"
    with open(out, encoding="utf-8") as f:
        data = embedded(f.read())
    assert sum(sum(s["bin_hops"]) for s in data["seams"]) == 1_000_000
    assert all(len(c["t"]) <= 800 for c in data["counters"])


def test_rendering_never_imports_torch(rl_run):
    import subprocess
    import sys

    code = ("import sys, flowmap; from flowmap.reporters.html import render_html; "
            f"render_html(flowmap.load({rl_run.path!r}).view); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
