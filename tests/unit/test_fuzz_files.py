"""Every YAML and JSON file flowmap reads takes any bytes: one sentence and exit 2.

Seam maps, budget files and baselines nested thousands deep once raised
RecursionError; binary or UTF-16 seam maps UnicodeDecodeError; a FIFO would
block forever. `run.json` is informational: a bad one is a problem line in the
report, never a refusal of the run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os

import pytest
from fuzz_shards import make_run

from flowmap.cli.main import main
from flowmap.strict_json import dumps

BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))

CONTENTS = {
    "deep_yaml": ("[" * 5000 + "]" * 5000).encode(),
    "deep_yaml_map": ("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 300))).encode(),
    "deep_json": ("[" * 100_000 + "]" * 100_000).encode(),
    "binary": bytes(range(256)) * 8,
    "utf16": "seams:\n  - target: os.path:join\n    owner: x\n".encode("utf-16"),
    "bad_utf8": b"seams:\n  - target: \xff\xfe\n",
    "laughs": BILLION_LAUGHS.encode(),
    "huge_number": b'{"flowmap": "baseline", "schema": 1, "steps": 1e999, "seams": {}}',
    "nan": b'{"flowmap": "baseline", "schema": 1, "steps": NaN, "seams": {}}',
    "budget_numbers": b'seams:\n  "a -> b : c":\n    max_bytes_per_hop: ' + b"9" * 400
                      + b"\ncounters:\n  in_flight: {max: .nan}\n",
    "digits": b'{"flowmap": "baseline", "schema": 1, "steps": 1, "seams": {"a -> b : c": '
              b'{"bytes_per_step": ' + b"9" * 400 + b', "leaves": {}}}}',
}


def cli(*argv: str) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = main(list(argv))
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(str(tmp_path_factory.mktemp("r") / "run"))


def _file(tmp_path, kind: str, name: str) -> str:
    p = tmp_path / name
    if kind == "fifo":
        os.mkfifo(p)
    else:
        p.write_bytes(CONTENTS[kind])
    return str(p)


KINDS = [*CONTENTS, "fifo"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("verb", ["seams", "budget", "baseline"])
def test_a_hostile_config_file_is_one_sentence_and_exit_2(tmp_path, run, kind, verb):
    script = tmp_path / "prog.py"
    script.write_text("print('PROGRAM-RAN')\n")
    if verb == "seams":
        path = _file(tmp_path, kind, "map.yaml")
        code, out = cli("trace", "-o", str(tmp_path / "t"), "--seams", path, str(script))
    elif verb == "budget":
        path = _file(tmp_path, kind, "budget.yaml")
        code, out = cli("check", run, "--budget", path)
    else:
        path = _file(tmp_path, kind, "base.json")
        code, out = cli("check", run, "-b", path)
    assert "Traceback" not in out
    assert code == 2, out
    assert out.strip().count("\n") == 0 and out.startswith("flowmap: "), out
    assert "PROGRAM-RAN" not in out


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_run_json_is_a_problem_line_not_a_refusal(tmp_path, run, kind):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    os.remove(copy / "run.json")
    _file(copy, kind, "run.json")
    code, out = cli("report", str(copy))
    assert code == 0 and "Traceback" not in out
    if kind not in ("huge_number", "nan", "digits"):
        assert "run description" in out and "ignored" in out


def test_json_out_is_strict():
    doc = {"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": {"d": (2.0,)}}
    text = dumps(doc, sort_keys=True)
    assert text == '{"a": null, "b": [null, null, 1.5], "c": {"d": [2.0]}}'
    json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c}"))
