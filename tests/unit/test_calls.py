"""The one argument-binding and call-wrapping helper behind `flowmap.seam` and seam maps."""

from __future__ import annotations

import asyncio

import pytest

from flowmap import current_owner
from flowmap.capture import calls


class Engine:
    def generate(self, prompts, n=1, *rest, temperature=1.0):
        return prompts


def test_arguments_bind_by_parameter_name_and_leave_out_the_receiver():
    bound = calls.Arguments(Engine.generate).bind((Engine(), ["p"], 4), {"temperature": 0.5})
    assert list(bound) == ["self", "prompts", "n", "temperature"]
    assert calls.payload(bound) == {"prompts": ["p"], "n": 4, "temperature": 0.5}
    assert calls.payload(bound, ["n", "missing"]) == {"n": 4}


def test_a_function_without_a_signature_binds_by_position():
    bound = calls.Arguments(min).bind((3, 1), {"key": abs})
    assert bound == {"arg0": 3, "arg1": 1, "key": abs}


def test_arguments_the_signature_rejects_raise_type_error():
    with pytest.raises(TypeError):
        calls.Arguments(Engine.generate).bind((), {"nope": 1})


def _recording(fn, **kw):
    seen: list[tuple[str, object]] = []

    def enter(a, k):
        seen.append(("enter", (a, k, current_owner())))
        return "entered"

    def leave(entered, out):
        seen.append(("leave", (entered, out, current_owner())))

    return calls.wrap_call(fn, "engine", enter, leave, **kw), seen


def test_a_sync_call_runs_as_the_owner_between_the_hooks():
    def body(x, *, y):
        return (x + y, current_owner())

    wrapped, seen = _recording(body)
    assert wrapped(1, y=2) == (3, "engine")
    outer = current_owner()
    assert seen == [("enter", ((1,), {"y": 2}, outer)), ("leave", ("entered", (3, "engine"), outer))]
    assert wrapped.__name__ == "body"


def test_an_async_call_is_wrapped_as_a_coroutine():
    async def body(x):
        await asyncio.sleep(0)
        return (x, current_owner())

    wrapped, seen = _recording(body)
    assert asyncio.iscoroutinefunction(wrapped)
    assert asyncio.run(wrapped(5)) == (5, "engine")
    assert [what for what, _ in seen] == ["enter", "leave"]


def test_the_users_exception_passes_through_and_skips_leave():
    def body():
        raise KeyError("theirs")

    wrapped, seen = _recording(body)
    with pytest.raises(KeyError, match="theirs"):
        wrapped()
    assert [what for what, _ in seen] == ["enter"] and current_owner() != "engine"


def test_an_inactive_wrapper_calls_straight_through():
    wrapped, seen = _recording(lambda: current_owner(), active=lambda: False)
    assert wrapped() != "engine" and seen == []


def test_enter_may_take_a_tag_out_of_the_keywords_and_keep_the_callers_owner():
    """GIVEN an integration's caller tag in the keywords WHEN enter pops it THEN fn never sees it."""
    def body(x, **kw):
        return (x, kw, current_owner())

    wrapped = calls.wrap_call(body, None, lambda a, kw: kw.pop("_caller", None),
                              lambda caller, out: None)
    assert wrapped(1, _caller="driver", y=2) == (1, {"y": 2}, current_owner())


def test_owner_of_names_each_calls_owner_from_what_enter_returned():
    def body(role):
        if role == "boom":
            raise RuntimeError(role)
        return current_owner()

    wrapped = calls.wrap_call(body, "fixed", lambda a, k: a[0] or None, lambda e, out: None,
                              owner_of=lambda entered: entered)
    before = current_owner()
    assert wrapped("actor_rollout/1") == "actor_rollout/1"  # owner_of overrides `owner`
    assert wrapped("") == before  # None: the caller's owner is kept
    with pytest.raises(RuntimeError):
        wrapped("boom")
    assert current_owner() == before  # reset even when the body raised
