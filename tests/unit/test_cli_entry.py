"""A plain `flowmap trace` command line is read without the CLI framework, as the framework reads it.

`cli/entry.py` takes the common `trace` command lines itself (typer and the
pydantic it loads cost every traced run ~0.2 s of CPU) and hands anything
else to the full CLI. The parse must agree with typer's where it answers, and
the two ways must end the same (output, exit status) where it does not matter
which one ran.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from flowmap.cli.entry import Plain, plain_trace


def test_plain_command_lines_are_read() -> None:
    assert plain_trace(["trace", "train.py", "--lr", "1", "-o", "x"]) == Plain(
        "train.py", None, ["--lr", "1", "-o", "x"], None, None, [], [], [], False, None)
    assert plain_trace(["trace", "-o", "run", "--process", "driver", "--seams", "a.yaml",
                        "--seams", "b.yaml", "--preset", "trl", "--no-transport", "zmq",
                        "train.py"]) == Plain(
        "train.py", None, [], "run", "driver", ["a.yaml", "b.yaml"], ["trl"], ["zmq"], False, None)
    assert plain_trace(["trace", "--output", "run", "-m", "pkg.mod", "-o", "its", "x"]) == Plain(
        None, "pkg.mod", ["-o", "its", "x"], "run", None, [], [], [], False, None)
    assert plain_trace(["trace", "--aggregate", "--detail-steps", "5", "t.py", "--aggregate"]) == Plain(
        "t.py", None, ["--aggregate"], None, None, [], [], [], True, 5)


@pytest.mark.parametrize("argv", [
    [], ["report", "run"], ["trace"], ["trace", "--help"], ["trace", "-h"],
    ["trace", "--output=run", "t.py"], ["trace", "-o"], ["trace", "-o", "a", "-o", "b", "t.py"],
    ["trace", "--", "t.py"], ["trace", "--unknown", "t.py"], ["trace", "-m"],
    ["trace", "-o", "run"], ["trace", "--aggregate", "--aggregate", "t.py"],
    ["trace", "--detail-steps", "many", "t.py"],
])
def test_anything_else_goes_to_the_full_cli(argv: list[str]) -> None:
    assert plain_trace(argv) is None


def _both(tmp_path, args: list[str]) -> list[tuple[int, str, str]]:
    """`flowmap ARGS` through the entry point and through the full CLI."""
    out = []
    for i, entry in enumerate(("from flowmap.cli.entry import main", "from flowmap.cli.main import main")):
        argv = [a.replace("RUN", str(tmp_path / f"run{i}")) for a in args]
        r = subprocess.run([sys.executable, "-c", f"import sys; {entry}; sys.argv[0] = 'flowmap'; main()",
                            *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        out.append((r.returncode, r.stdout, r.stderr.replace(str(tmp_path / f"run{i}"), "RUN")
                    .replace(f"run{i}", "RUN")))
    return out


@pytest.mark.parametrize("args", [
    ["trace", "-o", "RUN", "prog.py", "--flag", "x"],
    ["trace", "-o", "RUN", "missing.py"],
    ["trace", "-o", "RUN", "--seams", "missing.yaml", "prog.py"],
    ["trace", "-o", "RUN", "--no-transport", "nope", "prog.py"],
    ["trace", "-o", "RUN", "-m", "prog", "-o", "its-own"],
    ["trace", "-o", "RUN", "--aggregate", "--detail-steps", "0", "prog.py"],
    ["trace", "-o", "RUN", "--detail-steps", "2", "prog.py"],
    ["trace", "-o", "RUN", "--aggregate", "--detail-steps", "-1", "prog.py"],
])
def test_the_entry_point_and_the_full_cli_end_alike(tmp_path, args: list[str]) -> None:
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import sys
        import flowmap
        flowmap.hop("a", "b", {"argv": sys.argv[1:]}, name="args")
        print("argv", sys.argv[1:])
        sys.exit(3)
    """))
    fast, full = _both(tmp_path, args)
    assert fast == full


def _declared(verb: str) -> tuple[set[str], set[str]]:
    """(options taking a value, flags) of `verb` as the full CLI declares them."""
    import typer

    from flowmap.cli.main import app

    command = typer.main.get_command(app).commands[verb]
    options = [p for p in command.params if p.param_type_name == "option"]
    return ({o for p in options if not p.is_flag for o in p.opts},
            {o for p in options if p.is_flag for o in p.opts})


def test_the_two_entry_points_accept_the_same_trace_options() -> None:
    """One list of trace's options (cli/options.py) for the plain reader and the full CLI."""
    from flowmap.cli import options

    values, flags = _declared("trace")
    assert values == set(options.TRACE_VALUES)
    assert flags == set(options.TRACE_FLAGS)
    assert _declared("discover") == (set(options.DISCOVER_VALUES), set())


@pytest.mark.parametrize("option", sorted(
    __import__("flowmap.cli.options", fromlist=["TRACE_VALUES"]).TRACE_VALUES.keys() - {"-m"}))
def test_every_trace_option_keeps_a_modules_own_arguments_whole(option: str) -> None:
    """Each of trace's options, before `-m MODULE`, is read the same by both entry points:
    its value is taken, and the module's own arguments follow `--` in the full CLI."""
    from flowmap.cli.main import _module_args_verbatim

    value = "2" if option == "--detail-steps" else "v"
    argv = ["trace", "--aggregate", option, value, "-m", "pkg.mod", "--lr", "1"]
    assert _module_args_verbatim(argv) == [*argv[:6], "--", "--lr", "1"]
    plain = plain_trace(argv)
    assert plain is not None and plain.module == "pkg.mod" and plain.args == ["--lr", "1"]
