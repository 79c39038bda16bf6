"""The field corpus (examples/field/): each script, traced, gets the finding its EXPECT names.

`scripts/field_score.py` regenerates docs/findings.md's table from the same
runs; here each script is its own test: a case must get a finding of its kind
on its seam with bytes within ±50 % of its hand figure, and a control (EXPECT =
None, the fix applied) no finding but `heaviest`, traced with and without
`--values`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("zmq")

SCORER = Path(__file__).resolve().parents[2] / "scripts" / "field_score.py"
spec = importlib.util.spec_from_file_location("field_score", SCORER)
assert spec is not None and spec.loader is not None
field_score = importlib.util.module_from_spec(spec)
sys.modules["field_score"] = field_score  # its dataclasses look their module up
spec.loader.exec_module(field_score)

CORPUS = field_score.corpus([])
TRACERS = max(2, min(4, os.cpu_count() or 1))


def test_the_corpus_has_three_shapes_and_a_control_per_class():
    kinds: dict[str, int] = {}
    controls = 0
    for p in CORPUS:
        e = field_score.expectation(p)
        if e is None:
            controls += 1
        else:
            kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    for kind in ("prefix_resend", "serialisation", "padding", "wide_ids", "chatty", "dropped"):
        assert kinds.get(kind, 0) >= 3, kind
    assert controls >= 6


@pytest.fixture(scope="module")
def scores(request, tmp_path_factory) -> dict[str, field_score.Score]:
    """The selected scripts traced TRACERS at a time (as scripts/field_score.py): a trace is mostly a
    start-up and torch's import, and the corpus is over a hundred traces."""
    chosen = [p for p in CORPUS if any(getattr(item, "callspec", None) is not None
                                       and item.callspec.params.get("script") == p
                                       for item in request.session.items)]
    root = tmp_path_factory.mktemp("field")
    with ThreadPoolExecutor(TRACERS) as pool:
        return dict(zip((p.stem for p in chosen), pool.map(lambda p: field_score.score(p, root), chosen)))


@pytest.mark.parametrize("script", CORPUS, ids=[p.stem for p in CORPUS])
def test_field_script_gets_its_expected_finding(script, scores):
    s = scores[script.stem]
    assert not s.error, s.error
    if s.control:
        assert s.false_kinds == [], f"false findings on a control: {s.found}"
    else:
        assert s.match is not None, f"expected {s.expect}, found {s.found}"
