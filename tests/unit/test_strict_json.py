"""JSON flowmap writes is strict RFC 8259: a non-finite float is null, wherever it sits."""

from __future__ import annotations

import json
import math

import pytest

from flowmap.strict_json import dumps, finite


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_anywhere_is_written_as_null(bad):
    doc = {"a": bad, "b": [1.5, bad, (bad, 2)], "c": {"d": {"e": bad}}, "f": "NaN"}
    text = dumps(doc, sort_keys=True)
    assert json.loads(text) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": {"e": None}},
                                "f": "NaN"}
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text


def test_a_finite_document_is_written_as_json_writes_it():
    doc = {"z": [1, 2.5, (3, "x")], "a": {"b": None, "c": True}, "n": -0.0}
    for kwargs in ({}, {"sort_keys": True, "separators": (",", ":")}):
        assert dumps(doc, **kwargs) == json.dumps(doc, **kwargs) == json.dumps(finite(doc), **kwargs)
