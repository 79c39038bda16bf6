"""Fuzz the readers: corrupt shards through every reader verb, hostile names through capture.

Each property runs a bounded number of examples (CI runs them all in tens of
seconds); `bench/fuzz_readers.py` runs thousands of mutants. The claims: no
verb lets a traceback escape, each exits 0 (1 for a check that regressed) or
with a one-sentence usage error (2), and memory stays in proportion to the file.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tracemalloc

import pytest
from fuzz_shards import SURROGATE, assert_no_verb_raises, make_run, mutate, shard_of
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import flowmap
from flowmap.errors import NotATrace

FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """(shard bytes, baseline path) of one real run with hostile names."""
    d = tmp_path_factory.mktemp("good")
    run = make_run(str(d / "run"))
    from flowmap.cli.main import main

    assert main(["baseline", run, "-o", str(d / "base.json")]) == 0
    return open(shard_of(run), "rb").read(), str(d / "base.json")


@FUZZ
@given(seed=st.integers(0, 2**32 - 1))
def test_no_corrupt_shard_makes_a_verb_raise(seed, good, tmp_path_factory):
    data, baseline = good
    mutant = mutate(data, random.Random(seed))
    note(mutant.how)
    assert_no_verb_raises(mutant.shard, baseline, str(tmp_path_factory.mktemp("m")))


def test_a_bad_event_is_skipped_counted_and_named(tmp_path, good, run_cli):
    data, _ = good
    lines = data.split(b"\n")
    hop_at = [i for i, line in enumerate(lines) if line.startswith(b'["h"')]
    ev = json.loads(lines[hop_at[3]])
    ev[1] = "x" * 1_000_000  # a 1 MB string as a time: once ~1 GB of RSS
    lines[hop_at[3]] = json.dumps(ev).encode()
    lines[hop_at[5]] = b'["c",1,0,NaN,0]'
    (tmp_path / "run").mkdir()
    shard = tmp_path / "run" / "h-1-ab.flowmap.jsonl"
    shard.write_bytes(b"\n".join(lines))
    tracemalloc.start()
    run = flowmap.load(tmp_path / "run")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40 << 20, f"{peak >> 20} MiB to read a {len(data) >> 10} KiB shard"
    assert run.health.bad_lines == 2 and len(run.hops) == 40 - 2
    r = run_cli(["report", str(tmp_path / "run")])
    assert r.returncode == 0
    assert f"h-1-ab.flowmap.jsonl: 2 bad line(s) skipped, first at line {hop_at[3] + 1}" in r.stdout
    j = run_cli(["report", str(tmp_path / "run"), "--json"])
    assert "NaN" not in j.stdout and json.loads(j.stdout)["health"]["bad_lines"] == 2


def _special_run(tmp_path, make) -> str:
    run = tmp_path / "run"
    run.mkdir()
    make_run(str(tmp_path / "ok"))
    shutil.copy(shard_of(str(tmp_path / "ok")), run / "good.flowmap.jsonl")
    make(run / "bad.flowmap.jsonl")
    return str(run)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "loop", "outside", "sparse"])
def test_special_files_are_skipped_with_one_sentence(tmp_path, kind, run_cli):
    outside = tmp_path / "secret.flowmap.jsonl"
    outside.write_bytes(open(shard_of(make_run(str(tmp_path / "other"))), "rb").read())

    def make(p):
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "dev_zero":
            os.symlink("/dev/zero", p)
        elif kind == "loop":
            os.symlink(p.name, p)
        elif kind == "outside":
            os.symlink(outside, p)
        else:  # a header, then an 8 GiB hole
            with open(p, "wb") as f:
                f.write(open(outside, "rb").readline())
                f.truncate(8 << 30)

    run = _special_run(tmp_path, make)
    r = run_cli(["report", run], timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    n = len(flowmap.load(run).hops)
    assert n == 40 or (kind == "sparse" and n == 40)
    if kind != "sparse":
        assert "bad.flowmap.jsonl" in r.stdout and "skipped" in r.stdout


def test_merge_of_a_symlink_loop_is_one_sentence(tmp_path, run_cli):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    r = run_cli(["merge", "-o", str(tmp_path / "out"), str(loop)])
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "symlink loop" in r.stderr and "Traceback" not in r.stderr


def test_a_line_over_the_cap_is_skipped_and_the_rest_read(tmp_path, good):
    data, _ = good
    lines = data.split(b"\n")
    lines.insert(3, b'["e",1,"' + b"y" * (9 << 20) + b'"]')  # over MAX_LINE (8 MiB)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "h-1-ab.flowmap.jsonl").write_bytes(b"\n".join(lines))
    run = flowmap.load(tmp_path / "run")
    assert run.health.bad_lines == 1 and len(run.hops) == 40
    assert "first at line 4 (a line over" in run.health.problems[0]


def test_a_single_foreign_file_is_still_refused(tmp_path):
    p = tmp_path / "x.flowmap.jsonl"
    p.write_bytes(b"\x00\x01 not a trace")
    with pytest.raises(NotATrace, match="not a flowmap trace"):
        flowmap.load(p)


# -- capture side: hostile names and items ---------------------------------------------
NAMES = st.text(st.characters(blacklist_categories=()), max_size=30) | st.sampled_from(
    [SURROGATE, "\ud800", "a\udcffb", "x" * 20_000, "", "\x00", "</script>", "[bold]"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(src=NAMES, dst=NAMES, name=NAMES, item=NAMES)
def test_hostile_names_are_kept_and_never_print_a_traceback(src, dst, name, item, tmp_path_factory,
                                                            capfd):
    from flowmap.read.plain import clean_text

    d = tmp_path_factory.mktemp("n") / "run"
    with flowmap.tracing(str(d)):
        for _ in range(3):
            flowmap.hop(src, dst, {name: 1}, name=name, items=[item])
            with flowmap.owner(src):
                flowmap.counter(name, 1.0)
                flowmap.drop([item], reason=name)
    run = flowmap.load(d)
    assert [(h.src, h.dst, h.name, h.items) for h in run.hops] == \
        [(clean_text(src), clean_text(dst), clean_text(name), (clean_text(item),))] * 3
    assert len(run.drops) == 3 and len(run.counter_samples) == 3
    assert run.health.bad_lines == 0 and run.health.tracer_errors == 0
    assert "Traceback" not in capfd.readouterr().err


def test_the_surrogate_escape_is_lossless_in_the_file(tmp_path):
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop(SURROGATE, "b", 1)
    raw = open(shard_of(str(tmp_path / "run")), "rb").read()
    raw.decode("utf-8")  # the file is valid UTF-8
    strings = [json.loads(line)[2] for line in raw.split(b"\n")[1:] if line.startswith(b'["s"')]
    assert SURROGATE in strings  # json gives back the very string the program had
    assert flowmap.load(tmp_path / "run").hops[0].src == "\\udcff"  # shown as that text


def test_items_are_never_iterated_unless_a_list_tuple_set_or_range(tmp_path, capfd):
    class Hooked(list):
        def __iter__(self):
            raise AssertionError("user __iter__ called")

        def __len__(self):
            raise AssertionError("user __len__ called")

    class Loud:
        def __str__(self):
            raise AssertionError("user __str__ called")

        __format__ = __repr__ = __str__

    gen = (i for i in range(5))
    it = iter([1, 2, 3])
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("a", "b", 1, items=gen)
        flowmap.hop("a", "b", 1, items=Hooked([7, 8]))
        flowmap.hop("a", "b", 1, items=range(3))
        flowmap.hop("a", "b", 1, items={"u"})
        flowmap.hop("a", "b", 1, items=[Loud()])
        flowmap.drop(it, reason="stale")
        flowmap.hop(0, 1.5, 1, name=True)  # numbers become their text
        flowmap.hop(object(), "b", 1)  # refused, one warning
        flowmap.hop(object(), "b", 1)
    assert list(gen) == [0, 1, 2, 3, 4] and list(it) == [1, 2, 3]
    run = flowmap.load(tmp_path / "run")
    items = [h.items for h in run.hops]
    assert items[:4] == [(), (7, 8), (0, 1, 2), ("u",)]
    assert items[4][0].startswith("<Loud@")
    assert (run.hops[5].src, run.hops[5].dst, run.hops[5].name) == ("0", "1.5", "True")
    assert len(run.hops) == 6 and run.drops[0].items == ()
    err = capfd.readouterr().err
    assert err.count("of type object was given") == 1 and err.count("generator are not read") == 1
