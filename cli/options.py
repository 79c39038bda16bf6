"""The options of the verbs that run a program (`trace`, `discover`), listed once.

Two readers of a command line need them without the CLI framework: the plain
`flowmap trace` reader (`entry.py`, which must not import typer) and the
guard that keeps a module's own arguments whole after `-m MODULE`
(`main.py`). The typer declarations in `trace.py` and `discover.py` are
checked against these tables (tests/unit/test_cli_entry.py), so the three
cannot drift apart.
"""

from __future__ import annotations

# trace's options that take one value, by the name of the parameter they set
TRACE_VALUES = {"-o": "output", "--output": "output", "--process": "process", "-m": "module",
                "--seams": "seams", "--preset": "presets", "--no-transport": "no_transport",
                "--detail-steps": "detail_steps"}
TRACE_LISTS = ("seams", "presets", "no_transport")  # those that may be given more than once
TRACE_FLAGS = {"--aggregate": "aggregate", "--values": "values",
               "--no-auto-seams": "no_auto_seams"}  # trace's options that take no value

# discover's options that take one value
DISCOVER_VALUES = ("-o", "--output", "-m", "--seconds", "--calls", "--steps", "--include",
                   "--exclude", "--min-bytes")

# Every option of `trace` or `discover` that takes a value: what follows it is that value,
# not the program.
VALUE_OPTIONS = frozenset(TRACE_VALUES) | frozenset(DISCOVER_VALUES)
