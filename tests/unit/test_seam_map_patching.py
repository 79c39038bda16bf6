"""Seam-map patching in-process: targets imported before and after start-up, what each
call records, and the promise that the user's function runs exactly as before."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid

import pytest

import flowmap
from flowmap.seams import Patcher, parse_seam_map

MODULE = """
import asyncio

class Learner:
    calls = 0

    def step(self, batch, lr=0.1):
        Learner.calls += 1
        return {"loss": 1.5, "n": len(batch["uid"])}

    @staticmethod
    def norm(x):
        return [v / 2 for v in x]

    @classmethod
    def make(cls, size):
        return [0] * size

def score(texts):
    return [float(len(t)) for t in texts]

def boom(x):
    raise ValueError("the user's own error")

async def fetch(n):
    await asyncio.sleep(0)
    return list(range(n))
"""


@pytest.fixture
def module_name(tmp_path, monkeypatch):
    """A fresh, not yet imported module with the functions above."""
    name = f"seamtarget_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def patch(module_name: str, seams: str) -> Patcher:
    text = "seams:\n" + textwrap.indent(textwrap.dedent(seams).replace("MOD", module_name), "  ")
    patcher = Patcher(parse_seam_map(text, "test.yaml"))
    patcher.install()
    return patcher


def test_a_module_imported_after_start_up_is_patched_on_import(tmp_path, module_name):
    # GIVEN a seam map installed before the module is imported
    patcher = patch(module_name, """
        - target: MOD:Learner.step
          owner: trainer
          args: [batch]
          result_name: metrics
          items: batch.uid
          dims: {batch.ids: [batch, tokens]}
    """)
    assert module_name not in sys.modules
    # WHEN the program imports it and calls the method under a trace
    with flowmap.tracing(str(tmp_path / "run")), flowmap.owner("driver"):
        mod = __import__(module_name)
        out = mod.Learner().step({"uid": ["a", "b"], "ids": [1, 2, 3]})
    # THEN the call and the return are hops, and the function ran as written
    assert out == {"loss": 1.5, "n": 2} and mod.Learner.calls == 1
    assert type(mod.__loader__).__name__ == "SourceFileLoader"  # the hook left no trace
    assert patcher.unresolved() == {}
    run = flowmap.load(str(tmp_path / "run"))
    call, back = run.hops
    assert (call.src, call.dst, call.name, call.items) == ("driver", "trainer", "step", ("a", "b"))
    assert {leaf.path for leaf in call.leaves} == {"batch.uid[*]", "batch.ids[*]"}
    assert (back.src, back.dst, back.name) == ("trainer", "driver", "metrics")
    assert {leaf.path for leaf in back.leaves} == {"result.loss", "result.n"}


def test_call_and_return_leaves_are_named_as_dims_keys_them(tmp_path, module_name):
    # GIVEN a map whose dims name a call leaf, a returned field and a returned tensor
    torch = pytest.importorskip("torch")
    (tmp_path / f"{module_name}_t.py").write_text(textwrap.dedent("""
        import torch

        def generate(batch):
            return {"tokens": torch.zeros(2, 5, dtype=torch.int64)}

        def score(tokens):
            return torch.ones(tokens.shape[0])

        def pair(tokens):
            return tokens, tokens.float()
    """))
    name = f"{module_name}_t"
    patch(name, """
        - target: MOD:generate
          owner: rollout
          dims: {batch.prompt: [batch, prompt_tokens], result.tokens: [batch, tokens]}
        - target: MOD:score
          owner: reward
          dims: {tokens: [batch, tokens], result: [batch]}
        - target: MOD:pair
          owner: advantage
          args: []
          dims: {"result[0]": [batch, tokens]}
    """)
    try:
        mod = __import__(name)
        with flowmap.tracing(str(tmp_path / "run")):
            out = mod.generate({"prompt": torch.zeros(2, 3, dtype=torch.int64)})
            mod.score(out["tokens"])
            mod.pair(out["tokens"])
    finally:
        sys.modules.pop(name, None)
    # THEN every leaf carries the path its dims key names, on both sides
    dims = {(h.name, h.dst, leaf.path): leaf.dims
            for h in flowmap.load(str(tmp_path / "run")).hops for leaf in h.leaves}
    assert dims == {
        ("generate", "rollout", "batch.prompt"): ("batch", "prompt_tokens"),
        ("generate", "main", "result.tokens"): ("batch", "tokens"),
        ("score", "reward", "tokens"): ("batch", "tokens"),
        ("score", "main", "result"): ("batch",),
        ("pair", "main", "result[0]"): ("batch", "tokens"),  # a tuple's items, as reported
        ("pair", "main", "result[1]"): None,
    }


def test_a_module_already_imported_is_patched_at_once(tmp_path, module_name):
    mod = __import__(module_name)
    patch(module_name, "- {target: 'MOD:score', owner: reward}\n")
    with flowmap.tracing(str(tmp_path / "run")):
        assert mod.score(["ab", "c"]) == [2.0, 1.0]
    (call, back) = flowmap.load(str(tmp_path / "run")).hops
    assert (call.src, call.dst, back.src, back.dst) == ("main", "reward", "reward", "main")


def test_the_body_runs_as_the_owner_so_nested_seams_chain(tmp_path, module_name):
    # GIVEN two seams where one calls the other
    patch(module_name, """
        - {target: 'MOD:score', owner: reward}
        - {target: 'MOD:Learner.norm', owner: normaliser}
    """)
    mod = __import__(module_name)
    with flowmap.tracing(str(tmp_path / "run")), flowmap.owner("rollout"):
        mod.Learner.norm(mod.score(["abcd"]))
    run = flowmap.load(str(tmp_path / "run"))
    assert [h.seam for h in run.hops] == [
        ("rollout", "reward", "score"), ("reward", "rollout", "score"),
        ("rollout", "normaliser", "norm"), ("normaliser", "rollout", "norm"),
    ]


def test_static_and_class_methods_keep_their_kind(tmp_path, module_name):
    patch(module_name, """
        - {target: 'MOD:Learner.norm', owner: a}
        - {target: 'MOD:Learner.make', owner: b, result: false}
    """)
    mod = __import__(module_name)
    with flowmap.tracing(str(tmp_path / "run")):
        assert mod.Learner.norm([2, 4]) == [1.0, 2.0]
        assert mod.Learner().make(3) == [0, 0, 0]
    run = flowmap.load(str(tmp_path / "run"))
    assert [h.seam for h in run.hops] == [("main", "a", "norm"), ("a", "main", "norm"),
                                          ("main", "b", "make")]
    assert run.hops[2].leaves[0].path == "size"  # `cls` is not payload


def test_async_functions_are_awaited_and_recorded(tmp_path, module_name):
    patch(module_name, "- {target: 'MOD:fetch', owner: store}\n")
    mod = __import__(module_name)
    with flowmap.tracing(str(tmp_path / "run")):
        assert asyncio.run(mod.fetch(3)) == [0, 1, 2]
    assert [h.dst for h in flowmap.load(str(tmp_path / "run")).hops] == ["store", "main"]


def test_the_users_exception_passes_through_untouched(tmp_path, module_name):
    patch(module_name, "- {target: 'MOD:boom', owner: x}\n")
    mod = __import__(module_name)
    with flowmap.tracing(str(tmp_path / "run")):
        with pytest.raises(ValueError, match="the user's own error"):
            mod.boom(1)
    # the call was recorded, the return (there was none) was not
    assert [h.seam for h in flowmap.load(str(tmp_path / "run")).hops] == [("main", "x", "boom")]


def test_a_wrong_path_is_counted_never_raised(tmp_path, module_name):
    # GIVEN item and step paths that do not exist in the call
    patch(module_name, """
        - target: MOD:Learner.step
          owner: trainer
          items: batch.nothere
          step: self.nothere
          also: [{payload: result.nothere, src: a, dst: b, name: c}]
    """)
    mod = __import__(module_name)
    with flowmap.tracing(str(tmp_path / "run")):
        out = mod.Learner().step({"uid": []})
    # THEN the function still ran, the hops were recorded, the failures counted
    assert out["n"] == 0
    run = flowmap.load(str(tmp_path / "run"))
    assert len(run.hops) == 2 and run.hops[0].items == ()
    assert run.health.tracer_errors == 3


def test_step_and_extra_hops_come_from_paths(tmp_path, module_name):
    patch(module_name, """
        - target: MOD:Learner.step
          owner: trainer
          step: batch.step
          result: false
          also: [{payload: result.loss, src: loss, dst: driver, name: loss}]
    """)
    mod = __import__(module_name)
    with flowmap.tracing(str(tmp_path / "run")):
        mod.Learner().step({"uid": ["a"], "step": 7})
    run = flowmap.load(str(tmp_path / "run"))
    assert [(h.seam, h.step) for h in run.hops] == [
        (("main", "trainer", "step"), 7), (("loss", "driver", "loss"), 7)]


def test_targets_that_never_appear_are_reported_with_the_reason(module_name):
    patcher = patch(module_name, """
        - {target: 'MOD:nothere', owner: x}
        - {target: 'MOD:Nope.step', owner: x}
        - {target: 'never_imported_module_xyz:f', owner: x}
        - {target: 'never_imported_module_xyz:g', owner: x, optional: true}
    """)
    __import__(module_name)
    assert patcher.unresolved() == {
        f"{module_name}:nothere": f"{module_name} has no attribute nothere",
        f"{module_name}:Nope.step": f"{module_name} has no attribute Nope",
        "never_imported_module_xyz:f": "module never_imported_module_xyz was never imported",
    }


def test_without_a_trace_the_wrapper_only_calls_through(module_name):
    patch(module_name, "- {target: 'MOD:score', owner: reward}\n")
    mod = __import__(module_name)
    assert mod.score(["abc"]) == [3.0]
    assert mod.score.__flowmap_seam__ == f"{module_name}:score"
    assert mod.score.__wrapped__.__name__ == "score"


def test_patching_twice_wraps_once(module_name):
    text = "- {target: 'MOD:score', owner: reward}\n"
    patch(module_name, text)
    mod = __import__(module_name)
    first = mod.score
    patch(module_name, text)
    assert mod.score is first


def test_an_also_hop_leaf_is_named_by_its_field(tmp_path, module_name):
    patch(module_name, """
        - target: MOD:Learner.step
          owner: trainer
          result: false
          also: [{payload: result.loss, src: loss, dst: driver, name: loss}]
    """)
    mod = __import__(module_name)
    with flowmap.tracing(str(tmp_path / "run")):
        mod.Learner().step({"uid": ["a"]})
    view = flowmap.load(str(tmp_path / "run")).view
    assert [leaf.path for leaf in view.seams[("loss", "driver", "loss")].leaves] == ["loss"]


def test_an_args_name_the_function_lacks_is_warned_at_patch_time(tmp_path, module_name, capsys):
    patch(module_name, """
        - target: MOD:Learner.step
          owner: trainer
          args: [batch, bacth]
        - target: MOD:score
          owner: reward
          args: [texts]
    """)
    __import__(module_name)
    err = capsys.readouterr().err
    assert err.count("warning") == 1
    assert f"{module_name}:Learner.step has no argument 'bacth' (it takes: batch, lr)" in err
