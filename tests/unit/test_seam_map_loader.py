"""Seam-map files: what a valid file says, and the line a broken one is blamed on."""

from __future__ import annotations

import textwrap

import pytest

from flowmap.seams import SeamMapError, load_seam_maps, parse_seam_map, preset_path
from flowmap.seams.presets import available


def parse(text: str):
    return parse_seam_map(textwrap.dedent(text), "seams.yaml")


def error_of(text: str) -> str:
    with pytest.raises(SeamMapError) as info:
        parse(text)
    assert info.value.exit_code == 2
    return str(info.value)


def test_a_full_seam_is_read_with_every_field():
    # GIVEN a seam using every key
    m = parse("""
        version: 1
        seams:
          - target: pkg.learner:Learner.step
            owner: trainer
            caller: driver
            args: [batch]
            result: true
            name: batch
            result_name: metrics
            items: batch.uid
            dims: {batch.input_ids: [batch, tokens]}
            transport: copy
            step: self.step
            also:
              - {payload: result.adv, src: advantage, dst: trainer, name: advantages}
            optional: true
    """)
    # THEN each field lands in the spec
    (s,) = m.seams
    assert (s.module, s.qualname, s.owner, s.caller) == ("pkg.learner", "Learner.step", "trainer", "driver")
    assert (s.args, s.name, s.result_name, s.items) == (("batch",), "batch", "metrics", "batch.uid")
    assert s.dims == {"batch.input_ids": ("batch", "tokens")}
    assert (s.transport, s.step, s.optional, s.line) == ("copy", "self.step", True, 4)
    assert s.also[0].payload == "result.adv" and s.also[0].src == "advantage"


def test_defaults_name_the_payload_after_the_function():
    (s,) = parse("""
        seams:
          - {target: "pkg.mod:score", owner: reward}
    """).seams
    assert (s.name, s.result_name, s.args, s.call, s.result, s.transport) == (
        "score", "score", None, True, True, "ref")


def test_owner_names_expand_environment_variables(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("NOT_SET", raising=False)
    (s,) = parse("""
        seams:
          - {target: "m:f", owner: "trainer/rank${RANK}", caller: "driver${NOT_SET:-}"}
    """).seams
    assert (s.owner, s.caller) == ("trainer/rank1", "driver")


def test_dims_keys_are_leaf_paths_as_reported():
    (s,) = parse_seam_map(textwrap.dedent("""
        seams:
          - target: m:f
            owner: x
            dims: {batch.ids: [b, t], result: [b], "result[0]": [b], "batch.uid[*]": [b]}
    """), "seams.yaml").seams
    assert list(s.dims) == ["batch.ids", "result", "result[0]", "batch.uid[*]"]


@pytest.mark.parametrize("text, line, words", [
    ("seams:\n  - target: m:f\n    owner: x\n    argz: [a]\n", 4, "unknown key `argz`"),
    ("seams:\n  - target: m:f\n", 2, "needs `owner`"),
    ("seams:\n  - target: m.f\n    owner: x\n", 2, "is not `package.module:function`"),
    ("seams:\n  - target: m:f\n    owner: [x\n", 4, "not valid YAML"),
    ("seams:\n  - target: m:f\n    owner: x\n    transport: carrier-pigeon\n", 4, "transport"),
    ("seams:\n  - target: m:f\n    owner: x\n    result: maybe\n", 4, "true or false"),
    ("seams:\n  - target: m:f\n    owner: x\n    dims: [a, b]\n", 4, "dims must map"),
    ("seams:\n  - target: m:f\n    owner: x\n    args: [1x]\n", 4, "not a Python identifier"),
    ("seams:\n  - target: m:f\n    owner: x\n    items: 'a..b'\n", 4, "dotted path"),
    ("seams:\n  - target: m:f\n    owner: x\n    dims: {'result[': [a]}\n", 4, "not a leaf path"),
    ("seams:\n  - {target: 'm:f', owner: x}\n  - {target: 'm:f', owner: y}\n", 3, "mapped twice"),
    ("seams:\n  - target: m:f\n    owner: x\n    also: [{payload: result}]\n", 4, "needs `dst`"),
    ("seams: {target: m:f}\n", 1, "must be a list"),
    ("sems: []\n", 1, "unknown key `sems`"),
    ("", 1, "empty"),
])
def test_a_malformed_file_names_the_line_at_fault(text, line, words):
    message = error_of(text)
    assert message.startswith(f"seams.yaml:{line}: "), message
    assert words in message


def test_a_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(SeamMapError, match="cannot read the seam map"):
        load_seam_maps([str(tmp_path / "nope.yaml")])


def test_two_files_may_not_map_one_target(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("seams:\n  - {target: 'm:f', owner: x}\n")
    with pytest.raises(SeamMapError, match="already mapped at"):
        load_seam_maps([str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")])


def test_the_shipped_presets_are_valid():
    assert "trl" in available()
    m = load_seam_maps([preset_path(name) for name in available()])
    owners = {s.owner for s in m.seams}
    assert {"rollout", "reward", "loss", "ready_buffer", "weight_sync"} <= owners


def test_a_shipped_preset_reads_the_same_through_the_trusted_path():
    """`flowmap trace` reads the presets' step functions at every start without the guard
    against hostile YAML: that path must give what the checked one gives."""
    from flowmap.seams import load_seam_map
    from flowmap.seams.loader import load_shipped_map

    for name in available():
        assert load_shipped_map(preset_path(name)) == load_seam_map(preset_path(name))
