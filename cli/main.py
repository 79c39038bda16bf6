"""The `flowmap` app: registers one command per verb; every verb's errors go through one place.

Library code raises `FlowmapError` subclasses carrying an exit code;
`flowmap.cli.errors.one_line_errors` turns them into one line on stderr and
that code — a user mistake never ends in a traceback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from flowmap.cli.errors import one_line_errors
from flowmap.cli.options import VALUE_OPTIONS

if TYPE_CHECKING:
    from typer._click.core import Context  # typer vendors click: its own Context type


class _Verbs(TyperGroup):
    """The command group: a library error becomes one line on stderr and its exit code.

    Done here rather than in `main()` so that every way of invoking the app
    (the console script, `python -m flowmap`, typer's `CliRunner` in the
    tests) prints the same sentence and exits with the same code.
    """

    def invoke(self, ctx: Context) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


app = typer.Typer(
    cls=_Verbs,
    name="flowmap",
    help="See what flows through your RL training pipeline, seam by seam.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)

def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"flowmap {version()}\n")
        raise typer.Exit(0)


def version() -> str:
    """The installed distribution's version (`flowmap-rl`); the source tree's when not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("flowmap-rl")
    except PackageNotFoundError:
        return "unknown (not installed)"


@app.callback()
def _root(
    show_version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version,
                                               help="Print flowmap's version and exit.")] = False,
) -> None:
    """See what flows through your RL training pipeline, seam by seam."""


# One module per verb; each exposes `register(app)`. Every verb ships: a verb
# that cannot be imported is an error here, never a command quietly left out.
VERBS = ["trace", "discover", "report", "render", "export", "baseline", "check", "diff", "merge",
         "top", "serve"]


def _register() -> None:
    import importlib

    for verb in VERBS:
        importlib.import_module(f"flowmap.cli.{verb}").register(app)


_register()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and as a script exits with) the exit code."""
    args = _module_args_verbatim(sys.argv[1:] if argv is None else list(argv))
    try:
        rc = app(args=args, prog_name="flowmap", standalone_mode=False)
    except SystemExit as exc:
        return _exit(exc.code if isinstance(exc.code, int) else 1, argv)
    except typer.Exit as exc:
        return _exit(exc.exit_code, argv)
    except KeyboardInterrupt:
        return _exit(130, argv)
    except Exception as exc:
        # click's own usage errors (typer vendors click, so match by shape, not class)
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return _exit(code, argv)
        if type(exc).__name__ == "Abort":
            return _exit(1, argv)
        raise
    return _exit(rc if isinstance(rc, int) else 0, argv)


def _module_args_verbatim(argv: list[str]) -> list[str]:
    """`flowmap trace|discover -m mod --its-flag x`: everything after MODULE belongs to the module.

    click would read `x` as SCRIPT and `--its-flag` as an unknown option; a `--`
    after MODULE keeps the module's arguments whole and in order.
    """
    verb = next((a for a in argv if a in ("trace", "discover")), None)
    if verb is None:
        return argv
    j = argv.index(verb) + 1
    while j < len(argv):
        a = argv[j]
        if a == "-m" and j + 1 < len(argv):
            return argv[: j + 2] + ["--"] + argv[j + 2 :]
        if a in VALUE_OPTIONS:
            j += 2
        elif a.startswith("-"):
            j += 1
        else:
            break
    return argv


def _exit(code: int, argv: list[str] | None) -> int:
    if argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    main()
