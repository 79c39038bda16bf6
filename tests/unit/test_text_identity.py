"""Text identity: the strings (and floats) a hop carried, by ids that never link two of them.

GIVEN payloads of text, as a program hands them between stages,
WHEN their strings are taken and given ids,
THEN a string keeps its id while held, a new string never gets an old one, and the walk runs
none of the program's code.
"""

from __future__ import annotations

import gc

from flowmap.capture import text_identity
from flowmap.capture.text_identity import TextKeys, strings_of


def test_the_walk_takes_strings_of_lists_tuples_and_dict_values_in_order():
    a, b, c = "first prompt", "second prompt", "third prompt"
    assert strings_of([a, (b, {"role": "x", "text": c})]) == [a, b, c]  # "x": one character
    assert strings_of({"prompt": a}) == [a]  # values, never the keys
    rewards = [0.5, 1.5]
    got = strings_of({"rewards": rewards, "step": 3})
    assert got == rewards and all(x is y for x, y in zip(got, rewards))  # floats, never ints


def test_the_walk_never_enters_a_subclass_and_stays_bounded():
    class Hostile(list):  # a subclass's methods are the program's code
        def __iter__(self):
            raise AssertionError("called")

        def __getitem__(self, i):
            raise AssertionError("called")

    class Text(str):
        pass

    assert strings_of(Hostile(["never seen"])) == []
    assert strings_of([Text("a subclass")]) == []
    many = [f"prompt number {i}" for i in range(10_000)]
    assert strings_of(many) == many[:text_identity.PER_CONTAINER]
    both = {"prompts": many, "completions": [p[::-1] for p in many]}
    assert strings_of(both) == many[:4] + both["completions"][:4]  # each list is named
    deep: list = ["too deep"]
    for _ in range(text_identity.MAX_DEPTH + 1):
        deep = [deep]
    assert strings_of(deep) == []


def test_a_string_keeps_its_id_and_new_strings_at_freed_addresses_get_new_ones():
    keys = TextKeys()
    kept = "a prompt handed on " * 2
    first = keys.keys([kept])
    assert keys.keys([kept]) == first
    seen: set[int] = set(first)
    for i in range(2000):  # made and freed in a loop: addresses come back, ids never do
        s = "".join(["x"] * 24) + str(i % 3)
        got = keys.keys([s])[0]
        assert got not in seen
        seen.add(got)
        del s
        gc.collect(0)
    assert keys.keys([kept]) == first


def test_the_table_lets_the_oldest_strings_go_past_its_bound(monkeypatch):
    monkeypatch.setattr(text_identity, "MAX_HELD", 8)
    keys = TextKeys()
    strings = [f"string number {i}" for i in range(20)]
    ids = [keys.keys([s])[0] for s in strings]
    assert len(keys.held) == 8 and keys.chars == sum(map(len, strings[-8:]))
    assert keys.keys([strings[-1]]) == [ids[-1]]  # still held
    assert keys.keys([strings[0]]) != [ids[0]]  # let go: a new id, never a false link


def test_a_traced_hop_of_text_reads_back_with_its_strings_ids(tmp_path):
    import flowmap

    prompts = [f"prompt number {i}" for i in range(8)]
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("loader", "controller", prompts, name="prompts")
        flowmap.hop("controller", "generator", {"batch": prompts}, name="prompts")
        flowmap.hop("generator", "trainer", [p.upper() for p in prompts], name="completions")
        flowmap.hop("loader", "controller", {"n": 8}, name="count")  # no text: no ids
        for i in range(20):  # past a small detail window: folded hops take no one's ids
            flowmap.hop("generator", "trainer", [f"late text {i}"], name="late")
    hops = flowmap.load(tmp_path / "run").view.events.hops
    handed, again, written, count = hops[:4]
    assert len(handed.texts) == 4 and again.texts == handed.texts  # its first strings
    assert len(written.texts) == 4 and not set(written.texts) & set(handed.texts)
    assert count.texts == ()
    kept = flowmap.load(tmp_path / "run", detail_hops=6).view.events.hops
    late = [h for h in kept if h.name == "late"]
    assert len(late) < 20 and len({h.texts for h in late}) == len(late)
    assert all(len(h.texts) == 1 for h in late)


def test_strings_and_floats_beside_tensors_are_named_too(tmp_path):
    import torch

    import flowmap

    seqs, scores = torch.zeros(4, 8), [0.25, 0.5, 0.75, 1.0]
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("reward", "trainer", {"seqs": seqs, "scores": scores}, name="scored")
        flowmap.hop("trainer", "logger", {"seqs": seqs, "scores": scores}, name="again")
        flowmap.hop("trainer", "logger", {"seqs": seqs}, name="tensor only")
    first, again, alone = flowmap.load(tmp_path / "run").view.events.hops
    assert first.storages and len(first.texts) == 4 and again.texts == first.texts
    assert alone.texts == ()
