"""The `flowmap` command's entry point: a plain `flowmap trace` runs without the CLI framework.

`flowmap trace` runs the user's program in this process, so whatever the CLI
costs is part of every traced run's overhead. Building the typer app (all
verbs registered) and converting the arguments (typer loads pydantic to do it)
cost ~0.2 s of CPU, more than a training run's thousands of hops. So a `trace`
command line made only of trace's options (`options.py`) is read here, by hand, and run;
anything else (`--help`, an unknown or repeated option, `--`, a missing
script, another verb) goes to the full CLI (`main.py`), which says what it
says about it. Both ways end in `trace_run.trace_command`.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

from flowmap.cli.errors import one_line_errors
from flowmap.cli.options import TRACE_FLAGS as FLAGS
from flowmap.cli.options import TRACE_LISTS as LISTS
from flowmap.cli.options import TRACE_VALUES as OPTIONS


class Plain(NamedTuple):
    """A plain `flowmap trace` command line, read."""

    target: str | None
    module: str | None
    args: list[str]
    output: str | None
    process: str | None
    seams: list[str]
    presets: list[str]
    no_transport: list[str]
    aggregate: bool
    detail_steps: int | None
    values: bool = False
    auto_seams: bool = True


def plain_trace(argv: list[str]) -> Plain | None:
    """`flowmap trace`'s arguments from a plain command line, or None for the full CLI to read."""
    if not argv or argv[0] != "trace":
        return None
    single: dict[str, str] = {}
    lists: dict[str, list[str]] = {name: [] for name in LISTS}
    target: str | None = None
    flags: set[str] = set()
    i = 1
    while True:
        if i >= len(argv):
            return None  # no script: the full CLI's usage message
        a = argv[i]
        if not a.startswith("-") or a == "-":
            target, args = a, argv[i + 1:]  # SCRIPT: the rest is the program's
            break
        if a in FLAGS and a not in flags:
            flags.add(a)
            i += 1
            continue
        name = OPTIONS.get(a)
        if name is None or i + 1 >= len(argv) or name in single:
            return None
        if name in lists:
            lists[name].append(argv[i + 1])
        else:
            single[name] = argv[i + 1]
        i += 2
        if name == "module":
            args = argv[i:]  # everything after MODULE is the module's
            break
    detail = single.get("detail_steps")
    if detail is not None and not detail.lstrip("-").isdigit():
        return None  # not a count: the full CLI says so
    return Plain(target, single.get("module"), args, single.get("output"), single.get("process"),
                 lists["seams"], lists["presets"], lists["no_transport"], "--aggregate" in flags,
                 None if detail is None else int(detail), "--values" in flags,
                 "--no-auto-seams" not in flags)


def main() -> None:
    """The console script and `python -m flowmap`."""
    plain = plain_trace(sys.argv[1:])
    if plain is None:
        from flowmap.cli.main import main as full

        full()
        return
    from flowmap.cli.trace_run import trace_command

    with one_line_errors():
        try:
            code = trace_command(plain.target, plain.module, plain.args, output=plain.output,
                                 process=plain.process, seams=plain.seams, presets=plain.presets,
                                 no_transport=plain.no_transport, aggregate=plain.aggregate,
                                 detail_steps=plain.detail_steps, values=plain.values,
                                 auto_seams=plain.auto_seams)
        except KeyboardInterrupt:
            code = 130
    sys.exit(code)
