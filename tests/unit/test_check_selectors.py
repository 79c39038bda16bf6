"""Seam addresses: exact, role, glob, reversed arrow, and refusals."""

from __future__ import annotations

import pytest

from flowmap.check.selectors import parse_selector
from flowmap.errors import UsageError


def test_exact_address():
    s = parse_selector("rollout/0 -> ready_buffer : trajectory")
    assert s.matches("rollout/0", "ready_buffer", "trajectory")
    assert not s.matches("rollout/1", "ready_buffer", "trajectory")
    assert not s.matches("rollout/0", "ready_buffer", "other")


def test_role_matches_its_instances_and_any_name():
    s = parse_selector("rollout -> ready_buffer")
    assert s.matches("rollout/0", "ready_buffer", "trajectory")
    assert s.matches("rollout", "ready_buffer", "x")
    assert not s.matches("rollouts/0", "ready_buffer", "x")


def test_globs():
    s = parse_selector("rollout/* -> ready_buffer : traj*")
    assert s.matches("rollout/3", "ready_buffer", "trajectory")
    assert not s.matches("rollout", "ready_buffer", "trajectory")
    assert parse_selector("* -> *").matches("a", "b", "c")


def test_reversed_arrow():
    s = parse_selector("trainer/rank0 <- batcher : batch")
    assert (s.src, s.dst, s.name) == ("batcher", "trainer/rank0", "batch")


@pytest.mark.parametrize("text", ["rollout", "-> b", "a ->", "a -> b :", "a -> b -> c"])
def test_bad_addresses(text):
    with pytest.raises(UsageError, match="src -> dst"):
        parse_selector(text)
