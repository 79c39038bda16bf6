"""The written seam map loads as flowmap trace reads it; targets are named or refused with a reason."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
from discover_records import fn, record

from flowmap.discover.candidates import analyse
from flowmap.discover.filters import CodeInfo
from flowmap.discover.naming import KERNEL, resolve
from flowmap.discover.seammap import guess_dims, render, suggest_owner
from flowmap.seams import parse_seam_map


def test_the_map_loads_with_args_results_names_and_dims():
    key_a, a = fn("pipe:RolloutWorker.generate", calls=3, call_bytes=1560, result_bytes=25600,
                  args=["prompts"], contexts=[((), 3)])
    a["stats"]["leaves"] = {
        "prompts.prompt_ids": ["tensor", "int64", [4, 16]],
        "result.tokens": ["tensor", "int64", [16, 48]],
        "result.rewards": ["tensor", "float32", [16]],
        "result.[*].x": ["tensor", "float32", [16]],
    }
    key_b, b = fn("pipe:PromptDataset.sample", calls=3, result_bytes=1560, contexts=[((), 3)])
    key_c, c = fn("pipe:WeightSync.push", calls=3, call_bytes=3000, args=["state"],
                  contexts=[((), 3)])
    d = analyse([record((key_a, a), (key_b, b), (key_c, c))])
    spec = {s.target: s for s in parse_seam_map(render(d, "flowmap discover x.py")).seams}
    gen, sample, push = (spec["pipe:RolloutWorker.generate"], spec["pipe:PromptDataset.sample"],
                         spec["pipe:WeightSync.push"])
    assert (gen.owner, gen.args, gen.name, gen.result_name) == ("rollout", ("prompts",),
                                                                "prompts", "generate")
    # the first dimension common to most leaves is the batch; names say tokens
    assert gen.dims == {"result.tokens": ("batch", "tokens"), "result.rewards": ("batch",)}
    # no argument carried data: the call hop is off, the result kept
    assert (sample.owner, sample.call, sample.result) == ("dataset", False, True)
    assert (push.owner, push.result) == ("weight_sync", False)


@pytest.mark.parametrize(("qualname", "owner"), [
    ("score", "reward"), ("GRPOTrainer._generate_and_score_completions", "rollout"),
    ("GRPOTrainer.compute_loss", "loss"), ("Learner.train_step", "trainer"),
    ("GRPOTrainer._get_per_token_logps_and_entropies", "policy"),
    ("split_tensor_dict", "batch_assembly"), ("PromptDataset.sample", "dataset"),
    ("Critic.step", "critic"),
])
def test_owner_guesses(qualname, owner):
    key, f = fn(f"m:{qualname}", call_bytes=8, args=["x"], contexts=[((), 2)])
    (c,) = analyse([record((key, f))]).seams
    assert suggest_owner(c) == owner


def test_dims_are_left_out_without_a_common_batch_dimension():
    key, f = fn("m:f", call_bytes=8, args=["w"], contexts=[((), 2)])
    f["stats"]["leaves"] = {"w.weight": ["tensor", "float32", [64, 32]],
                            "w.bias": ["tensor", "float32", [64]]}
    (c,) = analyse([record((key, f))]).seams
    assert guess_dims(c) == {}


LIB = '''
import functools
import torch

def helper(x):
    return x

def traced(fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        return fn(*a, **kw)
    return wrapper

class Worker:
    @traced
    def run(self, batch):
        return batch

def make():
    def inner(x):
        return x
    return inner

square = lambda x: x * x  # noqa: E731

class Kernel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x
'''


def info_of(module, fn_or_code, qualname=None):
    code = getattr(fn_or_code, "__code__", fn_or_code)
    return CodeInfo(module.__name__, qualname or code.co_qualname, code.co_filename,
                    code.co_firstlineno, (), False)


def test_targets_and_the_reasons_a_function_cannot_be_one(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "naming_lib.py").write_text(textwrap.dedent(LIB))
    (tmp_path / "naming_user.py").write_text("from naming_lib import helper as h\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    lib = importlib.import_module("naming_lib")
    importlib.import_module("naming_user")
    try:
        assert resolve(info_of(lib, lib.Worker.run.__wrapped__)) == ("naming_lib:Worker.run", None)
        t, why = resolve(info_of(lib, lib.make()))
        assert t is None and why == "a closure defined inside make: nothing outside it can name it"
        t, why = resolve(info_of(lib, lib.square))
        assert t is None and why.startswith("a lambda")
        assert resolve(info_of(lib, lib.Kernel.forward)) == (None, KERNEL)
        # a function imported into its caller's module is named where it is defined: the
        # patcher rebinds the other modules' names, so no caller's calls are lost
        info = info_of(lib, lib.helper)
        info.caller_module = "naming_user"
        assert resolve(info) == ("naming_lib:helper", None)
        # a function of a script flowmap did not run (python itself ran it) is no target
        main = info_of(lib, lib.helper)
        main.module = "__main__"
        assert "__main__" in (resolve(main)[1] or "")
    finally:
        for m in ("naming_lib", "naming_user"):
            sys.modules.pop(m, None)


@pytest.mark.parametrize("ray", [False, True])
def test_split_by_is_proposed_for_python_targets_and_never_for_ray_ones(ray):
    # GIVEN a log-prob function called on two models, with and without gradients
    key, f = fn("m:Policy.logprobs", calls=8, call_bytes=64, result_bytes=64, args=["batch"],
                contexts=[((), 8)])
    f["stats"]["given"] = {"self": 2}
    f["stats"]["grad_modes"] = [False, True]
    if ray:  # marked by the process that ran the program: a Ray actor method
        f["ray"] = True
    spec = parse_seam_map(render(analyse([record((key, f))]), "flowmap discover x.py")).seams[0]
    # THEN a Python target is split by what it was given; a Ray one is not (its arguments
    # arrive as fresh copies at every call), and the map's comment says why
    assert spec.split_by == (() if ray else ("self", "grad"))
    text = render(analyse([record((key, f))]), "flowmap discover x.py")
    assert ("split_by does not apply" in text) is ray
