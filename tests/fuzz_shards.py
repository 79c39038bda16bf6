"""Corrupt shards and run every reader verb on them: the fuzz engine of the reader tests.

Shared by `tests/unit/test_fuzz_readers.py` (a bounded number of examples, in
CI) and `bench/fuzz_readers.py` (thousands of mutants, by hand). A plain
module, like flowmap_cli.py: tests/ is on sys.path through its conftest.

A mutant is a real run whose shard was changed by one `Mutation` — the kinds
of damage a killed writer, a full disk, a bad copy or an attacker leave.
`run_verbs` runs each CLI verb in this process (`flowmap.cli.main.main`) and
returns what each did: its exit code, and the traceback if one escaped.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import traceback
from dataclasses import dataclass

import flowmap

SURROGATE = os.fsdecode(b"\xff")  # '\udcff': a lone surrogate, as a filename decodes

# Values that once made a reader raise, hang or blow up (issue 11), as JSON text.
HOSTILE_VALUES = [
    '"' + "x" * 1_000_000 + '"', "1" * 400, "-" + "9" * 400, "NaN", "Infinity", "-Infinity",
    "1e999", "-1", str(1 << 70), "[]", "{}", "null", "true", "1.5", "999999", '"\\ud800"',
    '"\\udcff"', "[" * 3000 + "]" * 3000, '{"a":' * 3000 + "1" + "}" * 3000, '"0"', "[[1,2,3]]",
    '[[0,"tensor",[1,[2,3]],0,0,8,1,null]]', '[[0,"t",[],99,0,1,1,null]]',
]


@dataclass
class Mutant:
    how: str
    shard: bytes


def make_run(path: str, hops: int = 40, aggregate: int | None = None) -> str:
    """A small real run: several seams, hostile names, counters, marks, drops, steps
    (with `aggregate`, hops past that many steps folded as `trace --aggregate` does)."""
    names = ["rollout/0", "trainer/0", f"weird{SURROGATE}", '<"quoted">\n', "n" * 5000]
    with flowmap.tracing(path, children=False, aggregate=aggregate):
        for i in range(hops):
            flowmap.step(i // 10)
            src, dst = names[i % len(names)], names[(i + 1) % len(names)]
            flowmap.hop(src, dst, {"tokens": b"x" * (64 + i), f"k{SURROGATE}": [1, 2, 3]},
                        name=f"batch{i % 3}", items=[i, f"id{SURROGATE}{i}"])
            flowmap.counter("in_flight", i % 7)
            flowmap.mark("phase")
            if i % 9 == 0:
                flowmap.drop([i], reason="stale")
    return path


def shard_of(run_dir: str) -> str:
    (name,) = [n for n in os.listdir(run_dir) if n.endswith(".flowmap.jsonl")]
    return os.path.join(run_dir, name)


def mutate(data: bytes, rng: random.Random) -> Mutant:
    """One random mutation of the shard bytes `data`."""
    lines = data.split(b"\n")
    kind = rng.choice(MUTATIONS)
    return Mutant(kind.__name__, kind(lines, data, rng))


def _field(lines, data, rng):
    """Replace one field of one event (or the header) with a hostile value."""
    i = rng.randrange(len(lines) - 1)
    try:
        ev = json.loads(lines[i])
    except ValueError:
        return data
    value = rng.choice(HOSTILE_VALUES)
    if isinstance(ev, list) and ev:
        j = rng.randrange(len(ev))
        parts = [json.dumps(x) for x in ev]
        parts[j] = value
        lines[i] = ("[" + ",".join(parts) + "]").encode()
    elif isinstance(ev, dict) and ev:
        key = rng.choice(sorted(ev))
        lines[i] = json.dumps({k: v for k, v in ev.items() if k != key})[:-1].encode() + (
            f', "{key}": {value}}}'.encode() if len(ev) > 1 else f'{{"{key}": {value}}}'.encode())
    return b"\n".join(lines)


def _truncate(lines, data, rng):
    return data[: rng.randrange(len(data))]


def _drop_line(lines, data, rng):
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def _shuffle(lines, data, rng):
    body = lines[1:]
    rng.shuffle(body)
    return b"\n".join(lines[:1] + body)


def _flip_bytes(lines, data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 20)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def _zeros(lines, data, rng):
    at = rng.randrange(len(data))
    return data[:at] + b"\0" * rng.randint(1, 5000) + data[at:]


def _deep_line(lines, data, rng):
    lines.insert(rng.randrange(1, len(lines)), b"[" * 100_000 + b"]" * 100_000)
    return b"\n".join(lines)


def _bad_utf8(lines, data, rng):
    i = rng.randrange(len(lines))
    lines[i] = lines[i][:5] + b"\xff\xfe\xc0" + lines[i][5:]
    return b"\n".join(lines)


def _header_only(lines, data, rng):
    return lines[0] + b"\n"


def _empty(lines, data, rng):
    return b""


def _utf16(lines, data, rng):
    return data.decode("utf-8", "replace").encode("utf-16")


MUTATIONS = [_field] * 8 + [_truncate, _drop_line, _shuffle, _flip_bytes, _zeros, _bad_utf8,
                            _header_only, _empty, _utf16, _deep_line]


@dataclass
class Outcome:
    verb: str
    code: int | None
    traceback: str | None


def verbs(run: str, out: str, baseline: str) -> list[tuple[str, list[str]]]:
    """Every reader verb, on `run`, writing under `out`; `baseline` is a good one."""
    return [
        ("report", ["report", run]),
        ("report --json", ["report", run, "--json"]),
        ("render --html", ["render", run, os.path.join(out, "v.html"), "--html"]),
        ("render --dot", ["render", run, "--dot", os.path.join(out, "v.dot")]),
        ("render --svg", ["render", run, "--svg", os.path.join(out, "v.svg")]),
        ("export --perfetto", ["export", run, "--perfetto", os.path.join(out, "v.json")]),
        ("baseline", ["baseline", run, "-o", os.path.join(out, "b.json")]),
        ("check", ["check", run, "-b", baseline]),
        ("diff", ["diff", run, run]),
        ("merge", ["merge", "-o", os.path.join(out, "merged"), run]),
    ]


def run_verbs(run: str, out: str, baseline: str, only: list[str] | None = None) -> list[Outcome]:
    """Run each verb in this process; stdout/stderr are captured and checked for tracebacks."""
    from flowmap.cli.main import main

    results = []
    for verb, argv in verbs(run, out, baseline):
        if only is not None and verb not in only:
            continue
        buf = io.StringIO()
        tb = None
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                code: int | None = main(argv)
        except BaseException:  # noqa: BLE001 - whatever escapes is the finding
            code, tb = None, traceback.format_exc()
        text = buf.getvalue()
        if tb is None and "Traceback (most recent call last)" in text:
            tb = text
        results.append(Outcome(verb, code, tb))
        shutil.rmtree(os.path.join(out, "merged"), ignore_errors=True)
    return results


def assert_no_verb_raises(shard: bytes, baseline: str, out: str) -> None:
    """Every verb on a run made of `shard` (in a fresh folder `out`, removed after):
    no traceback escapes, and each exits 0, 1 (a check that regressed) or 2 (usage)."""
    run = os.path.join(out, "run")
    os.makedirs(run)
    with open(os.path.join(run, "host-1-abcd.flowmap.jsonl"), "wb") as f:
        f.write(shard)
    for o in run_verbs(run, out, baseline):
        assert o.traceback is None, f"{o.verb}\n{o.traceback}"
        assert o.code in (0, 1, 2), f"{o.verb} exited {o.code}"
    shutil.rmtree(out)
