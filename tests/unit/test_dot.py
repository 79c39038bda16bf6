"""DOT output: golden structure, log-scaled edges, the RL loop, and names kept as text."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runs import HOSTILE, RLRunSpec, write_rl_run

import flowmap
from flowmap.model.graph import build_graph
from flowmap.reporters.dot import dot_source, quote

GOLDEN = os.path.join(os.path.dirname(__file__), "test_dot_golden.rl_run.dot")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
EDGE = re.compile(r"^  (n\d+) -> (n\d+) \[(.*)\];$")


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("rl") / "run")))


def _edges(text):
    out = {}
    for line in text.splitlines():
        m = EDGE.match(line)
        if m:
            attrs = dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\s]+)', m.group(3)))
            out[attrs["tooltip"].split("\\n")[0].strip('"')] = attrs
    return out


def test_dot_matches_the_golden_file(rl_run, golden):
    """GIVEN the GRPO-shaped run WHEN drawn by role THEN the DOT is byte-identical to the golden.

    Regenerate with `pytest --update-golden` after an intended change, and read the diff.
    """
    golden.check(GOLDEN, dot_source(rl_run.view))


def test_edges_are_sized_and_coloured_by_bytes_on_a_log_scale(rl_run):
    g = build_graph(rl_run)
    edges = _edges(dot_source(rl_run.view, instances=True))
    assert len(edges) == g.number_of_edges()
    by_bytes = sorted(edges, key=lambda k: g.edges[_key(g, k)]["bytes_per_step_mean"])
    widths = [float(edges[k]["penwidth"]) for k in by_bytes]
    assert widths == sorted(widths) and widths[0] == 1.0 and widths[-1] == 8.0
    assert edges[by_bytes[-1]]["color"] == '"#a50f15"'
    assert "/step" in edges[by_bytes[0]]["label"]


def _key(g, label):
    return next((u, v, k) for u, v, k in g.edges(keys=True) if k.replace(">", "&gt;") == label)


def test_the_loop_back_to_rollout_does_not_constrain_the_layout(rl_run):
    edges = _edges(dot_source(rl_run.view))
    back = {k for k, a in edges.items() if a.get("constraint") == "false"}
    assert back == {"weight_sync -&gt; rollout : weights"}
    assert edges["weight_sync -&gt; rollout : weights"]["style"] == "dashed"


def test_roles_are_labelled_with_their_instance_count(rl_run):
    text = dot_source(rl_run.view)
    assert '"rollout ×2\\nin ' in text and '"trainer ×2\\nin ' in text


def test_user_names_stay_text_in_the_dot_file(tmp_path):
    run = flowmap.load(write_rl_run(str(tmp_path / "run"), RLRunSpec(hostile=True)))
    text = dot_source(run.view, instances=True)
    assert "<" not in text and ">" not in text.replace("->", "")
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    assert 'evil\\"owner' in text and "x\\ny\\\\N" in text


@needs_dot
def test_user_names_stay_text_in_the_svg(tmp_path):
    run = flowmap.load(write_rl_run(str(tmp_path / "run"), RLRunSpec(hostile=True)))
    svg = subprocess.run(["dot", "-Tsvg"], input=dot_source(run.view, instances=True).encode(),
                         capture_output=True, check=True).stdout.decode()
    assert "<img" not in svg and HOSTILE not in svg
    assert "&lt;img src=x onerror=alert(1)&gt;" in svg
    assert "y\\N" in svg  # a backslash escape in a name is not a Graphviz substitution


@given(st.text())
def test_quote_always_yields_one_closed_dot_string(text):
    q = quote(text)
    assert q.startswith('"') and q.endswith('"') and len(q) >= 2
    inner = q[1:-1]
    assert "\n" not in inner and "\r" not in inner and "<" not in inner and ">" not in inner
    assert re.fullmatch(r'(?:[^"\\]|\\.)*', inner, flags=re.S)  # every quote is escaped
