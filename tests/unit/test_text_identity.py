"""Text identity: the strings (and floats) a hop carried, by ids that never link two of them.

GIVEN payloads of text, as a program hands them between stages,
WHEN their strings are taken and given ids,
THEN a string keeps its id while held, a new string never gets an old one, and the walk runs
none of the program's code.
"""

from __future__ import annotations

import gc

import pytest

import flowmap
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
    k = text_identity.PER_CONTAINER  # each list is named, up to the walk's bound in all
    assert strings_of(both) == many[:k] + both["completions"][:text_identity.MAX_STRINGS - k]
    deep: list = ["too deep"]
    for _ in range(text_identity.MAX_DEPTH + 1):
        deep = [deep]
    assert strings_of(deep) == []


def test_a_dataclass_s_fields_are_walked_through_its_type_s_descriptor_only():
    import dataclasses

    @dataclasses.dataclass
    class Trajectory:
        uid: str
        reward: float = 0.0

    class Hostile(Trajectory):  # a property named `__dict__` is the program's code
        @property  # type: ignore[misc]
        def __dict__(self):  # noqa: PLW3201
            raise AssertionError("called")

    t = Trajectory("u-000001", 0.25)
    assert strings_of({"traj": t}) == ["u-000001", t.reward]  # the score set on it is seen
    assert strings_of(Hostile("u-000002", 0.5)) == []
    assert strings_of(object()) == []


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
    assert len(handed.texts) == 8 and again.texts == handed.texts  # each of its strings
    assert len(written.texts) == 8 and not set(written.texts) & set(handed.texts)
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


def _hit(ok: bool) -> float:
    return 1.0 if ok else 0.0  # the same two float objects at every call


def test_a_reward_functions_constants_are_no_stages_and_its_list_is_its_callers(tmp_path):
    # GIVEN a format check and an accuracy check that each score with the same constants;
    # the accuracy check got the format scores; a driver relays the accuracy list as it is
    with flowmap.tracing(tmp_path / "run"):
        for i in range(3):
            flowmap.step(i)
            texts = [f"<ans>{i * k}</ans>" if k % 2 else f"{i}" for k in range(4)]
            flowmap.hop("gen", "format", texts, name="texts")
            with flowmap.owner("format"):
                fmt = [_hit(t.startswith("<ans>")) for t in texts]
                flowmap.hop("format", "accuracy", fmt, name="format_scores")
            with flowmap.owner("accuracy"):
                acc = [_hit(str(i) in t) for t in texts]
                flowmap.hop("accuracy", "driver", acc, name="scores")
            flowmap.hop("driver", "trainer", {"scores": acc}, name="scores")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the trainer's scores are the accuracy check's (the driver only handed them on),
    # not the format check's, whose constants they share
    assert edges == {("gen", "format"), ("format", "accuracy"), ("accuracy", "trainer")}, edges


@pytest.mark.skipif(text_identity.interned is None, reason="the C read of the interned flag")
def test_name_like_string_constants_are_no_stages_and_their_list_is_its_makers(tmp_path):
    # GIVEN a policy answering "yes"/"no" and a judge sending its own "yes"/"no" labels: the
    # same interned objects
    with flowmap.tracing(tmp_path / "run"):
        for i in range(3):
            flowmap.step(i)
            with flowmap.owner("policy"):
                answers = ["yes" if (i + k) % 3 else "no" for k in range(4)]
                flowmap.hop("policy", "judge", answers, name="answers")
            with flowmap.owner("judge"):
                gold = ["no" if (i + k) % 2 else "yes" for k in range(4)]
                flowmap.hop("judge", "trainer", {"gold": gold}, name="gold")
            flowmap.hop("policy", "trainer", answers, name="answers")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    assert edges == {("policy", "judge"), ("judge", "trainer"), ("policy", "trainer")}, edges
    # the walk names such a list as itself, and a list of prompts by its strings
    prompts = [" ".join(["a", str(k)]) for k in range(4)]
    assert text_identity.strings_of(answers) == [answers]
    assert text_identity.strings_of(prompts) == prompts


def test_token_ids_as_lists_are_the_list_a_stage_built(tmp_path):
    # GIVEN a tokenizer's ids as lists of ints, relayed unchanged (in a dict) by a router; and
    # a detokenizer that builds its own lists of the same small ints
    with flowmap.tracing(tmp_path / "run"):
        for i in range(3):
            flowmap.step(i)
            with flowmap.owner("tokenizer"):
                ids = [[(i * 7 + k * 3 + j) % 50 for j in range(12)] for k in range(4)]
                flowmap.hop("tokenizer", "router", ids, name="ids")
            with flowmap.owner("router"):
                flowmap.hop("router", "trainer", {"input_ids": ids}, name="batch")
            with flowmap.owner("detok"):
                again = [[(i * 7 + k * 3 + j) % 50 for j in range(12)] for k in range(4)]
                flowmap.hop("detok", "trainer", again, name="ids")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the router only handed the tokenizer's lists on; the detokenizer's are its own
    assert edges == {("tokenizer", "trainer"), ("detok", "trainer")}, edges
    assert text_identity.strings_of(ids) == ids[:4]


ctext = pytest.importorskip("flowmap.capture.ctext") if not flowmap.environment.pure_python() \
    else None


@pytest.mark.skipif(ctext is None, reason="FLOWMAP_PURE_PYTHON=1: the C twin is off")
def test_the_c_walk_takes_the_very_objects_the_python_walk_takes():
    # GIVEN payloads of every shape the walk enters or stops at: nested lists, tuples and
    # dicts (some wider than the walk's bounds), dataclasses and plain objects, interned and
    # one-character strings, a float constant repeated, token ids as ints, bytes and bools
    import dataclasses
    import random

    @dataclasses.dataclass
    class Record:
        a: object
        b: object = 0.5

    class Plain:
        def __init__(self, v: object) -> None:
            self.v = v

    const = 1.25
    rng = random.Random(7)
    leaves = [lambda: "x" * rng.randrange(5), lambda: str(rng.random()), rng.random,
              lambda: rng.randrange(500), lambda: const, lambda: "yes", lambda: None,
              lambda: b"bytes", lambda: True]

    def make(depth: int = 0) -> object:
        if depth > 5 or rng.random() < 0.3:
            return rng.choice(leaves)()
        n = rng.randrange(8)
        shape = rng.randrange(6)
        if shape == 0:
            return [make(depth + 1) for _ in range(n)]
        if shape == 1:
            return tuple(make(depth + 1) for _ in range(n))
        if shape == 2:
            return {f"k{i}": make(depth + 1) for i in range(n * 12 if rng.random() < .1 else n)}
        if shape == 3:
            return Record(make(depth + 1), make(depth + 1))
        if shape == 4:
            return Plain(make(depth + 1))
        return [str(rng.random()) for _ in range(n)] + (["yes"] if rng.random() < .3 else [])

    assert ctext.bounds() == {k: getattr(text_identity, k) for k in ctext.bounds()}
    assert text_identity.strings_of is ctext.strings_of
    for _ in range(20_000):
        payload = make()
        # THEN both walks take the same objects, in the same order
        want = text_identity.python_strings_of(payload)
        got = ctext.strings_of(payload)
        assert len(got) == len(want) and all(x is y for x, y in zip(got, want)), payload


@pytest.mark.skipif(ctext is None, reason="FLOWMAP_PURE_PYTHON=1: the C twin is off")
def test_the_c_table_gives_the_ids_the_python_table_gives(monkeypatch):
    # GIVEN batches of strings, floats and lists, some met before, some freed, under bounds
    # that let objects go by count and by weight
    import random

    for trial, (max_held, max_chars) in enumerate([(4, 16 << 20), (50, 100), (4096, 10_000)]):
        monkeypatch.setattr(text_identity, "MAX_HELD", max_held)
        monkeypatch.setattr(text_identity, "MAX_HELD_CHARS", max_chars)
        python, c = TextKeys(), text_identity.new_keys()
        assert type(c) is ctext.Keys
        rng = random.Random(trial)
        pool: list[object] = []
        for step in range(400):
            batch = []
            for _ in range(rng.randrange(10)):
                if pool and rng.random() < 0.4:
                    batch.append(rng.choice(pool))
                    continue
                kind = rng.randrange(3)
                made = ("s" * rng.randrange(2, 40) if kind == 0 else rng.random() if kind == 1
                        else [rng.randrange(9) for _ in range(rng.randrange(1, 5))])
                batch.append(made)
                pool.append(made)
            del pool[:-30]  # freed: their addresses come back to new objects
            if step % 50 == 0:
                gc.collect()
            # THEN both tables give the same ids, hold as many objects and weigh the same
            assert python.keys(batch) == c.keys(batch), step
            assert len(python.held) == len(c.held) and python.chars == c.chars


def test_a_process_pool_s_task_and_result_are_walked_for_their_strings_and_floats():
    # GIVEN the items a ProcessPoolExecutor's manager thread sends and takes (the program's
    # own classes are never entered: only dataclasses and these two)
    from concurrent.futures.process import _CallItem, _ResultItem

    completions = ["completion one", "completion two"]
    rewards = [0.25, 0.75]
    task = _CallItem(3, len, (completions,), {})
    result = _ResultItem(3, result=rewards)

    class Plain:
        def __init__(self) -> None:
            self.texts = completions

    # THEN the submitter's strings and the worker's floats are named; a plain object is not
    for walk in (text_identity.strings_of, text_identity.python_strings_of):
        assert walk(task) == completions
        assert walk(result) == rewards
        assert walk(Plain()) == []


def test_a_relay_that_hands_on_a_tail_or_a_shuffle_of_a_list_is_not_its_producer(tmp_path):
    # GIVEN a loader's 32 prompts and a reward stage's 32 scores, relayed: the tail of each
    # list, then both reversed (the very objects, none the relay's own)
    import random

    import flowmap

    prompts = [f"prompt number {i}" for i in range(32)]
    scores = [random.random() for _ in range(32)]
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("loader", "relay", prompts, name="prompts")
        flowmap.hop("reward", "relay", scores, name="scores")
        flowmap.hop("relay", "generator", prompts[20:], name="kept")
        flowmap.hop("relay", "trainer", scores[::-1], name="kept")
        flowmap.hop("relay", "generator", prompts[::-1], name="shuffled")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the data comes from where it was made, never from the relay
    assert edges == {("loader", "generator"), ("reward", "trainer")}
