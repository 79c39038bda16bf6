"""Which c10d functions flowmap wraps is read from torch, so a rename cannot blind it."""

from __future__ import annotations

import importlib.util
import types

import pytest

from flowmap.integrations.transports.dist_ops import classify, ops


def fake_c10d(**functions):
    """A module exporting these functions, as c10d does through `__all__`."""
    module = types.ModuleType("fake_c10d")
    for name, fn in functions.items():
        setattr(module, name, fn)
    module.__all__ = list(functions)
    return module


def test_a_function_torch_adds_or_renames_is_wrapped_by_its_parameters():
    # GIVEN a torch whose c10d exports functions no list of flowmap names
    def all_gather_fused(output_tensor, input_tensor, group=None, async_op=False): ...
    def broadcast_fast(tensor, src=None, group=None, async_op=False, group_src=None): ...
    def isend_tagged(tensor, dst=None, group=None, tag=0, group_dst=None): ...
    def get_world_size(group=None): ...
    def barrier(group=None, async_op=False, device_ids=None): ...

    found = ops(fake_c10d(all_gather_fused=all_gather_fused, broadcast_fast=broadcast_fast,
                          isend_tagged=isend_tagged, get_world_size=get_world_size,
                          barrier=barrier))
    # THEN the data-moving ones are ops, by what their parameters say
    assert set(found) == {"all_gather_fused", "broadcast_fast", "isend_tagged"}
    assert found["all_gather_fused"].kind == "collective"
    assert found["all_gather_fused"].sent == (1, "input_tensor")
    assert found["all_gather_fused"].group == (2, "group")
    assert found["broadcast_fast"].kind == "rooted"
    assert found["broadcast_fast"].root == (1, "src")
    assert found["isend_tagged"].kind == "p2p"


@pytest.mark.parametrize("name, params, kind, sent", [
    ("all_gather_object", ["object_list", "obj", "group"], "collective", "obj"),
    ("scatter_object_list", ["scatter_object_output_list", "scatter_object_input_list", "src",
                             "group", "group_src"], "rooted", "scatter_object_input_list"),
    ("reduce_scatter", ["output", "input_list", "op", "group", "async_op"], "collective",
     "input_list"),
    ("all_reduce_coalesced", ["tensors", "op", "group", "async_op"], "collective", "tensors"),
    ("gather", ["tensor", "gather_list", "dst", "group", "async_op", "group_dst"],
     "collective", "tensor"),
])
def test_what_each_rank_sends_is_named_by_the_parameter(name, params, kind, sent):
    op = classify(name, params)
    assert op is not None and op.kind == kind and op.sent is not None and op.sent[1] == sent
    assert op.objects == ("object" in name)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_the_installed_torch_ops_include_what_fsdp2_calls():
    import torch.distributed.distributed_c10d as c10d

    found = ops(c10d)
    # every exported function whose name says it moves data is found
    for name in ("all_reduce", "all_gather_single", "reduce_scatter_single",
                 "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
                 "all_reduce_coalesced", "all_gather_coalesced", "broadcast", "send", "recv"):
        if hasattr(c10d, name):
            assert name in found, name
    assert not {"get_rank", "barrier", "new_group", "destroy_process_group"} & set(found)


def _decorated(fn):
    """As c10d decorates its functions (`_exception_logger`, `_time_logger`)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def test_parameters_are_read_in_the_order_inspect_gives_them():
    import inspect

    from flowmap.integrations.transports.dist_ops import parameters

    # GIVEN functions of every parameter shape: positional-only, *args between the
    # positional and keyword-only ones, **kwargs, decorated, with a stated signature
    def every_kind(a, /, b, *rest, c, d=1, **more): ...
    def keyword_only(tensor, *, group=None, tag=0): ...
    def plain(tensor, group=None): ...
    def stated(*args, **kwargs): ...
    stated.__signature__ = inspect.signature(plain)
    shapes = [every_kind, keyword_only, plain, stated, _decorated(every_kind),
              _decorated(_decorated(keyword_only)), _decorated(stated)]
    # THEN each reads as `inspect.signature` reads it
    for fn in shapes:
        assert parameters(fn) == list(inspect.signature(fn).parameters), fn
    # AND so does every function the installed torch's c10d exports
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    import torch.distributed.distributed_c10d as c10d

    functions = [f for n in c10d.__all__ if type(f := vars(c10d).get(n)) is types.FunctionType]
    assert len(functions) > 20
    for fn in functions:
        assert parameters(fn) == list(inspect.signature(fn).parameters), fn.__name__
