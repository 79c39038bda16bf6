"""`flowmap serve [RUN]`: the live HTML page and Prometheus `/metrics` of a run (docs/live.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def is_loopback(host: str) -> bool:
    """Whether `host` stays on this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    run: Annotated[str | None, typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,  # noqa: UP007
    port: Annotated[int, typer.Option("--port", metavar="N", min=0, max=65535, help="TCP port (default 8765; 0: any free port).")] = 8765,
    bind: Annotated[str, typer.Option("--bind", metavar="ADDRESS", help="Address to listen on (default 127.0.0.1). Any other exposes the run's names and shapes to the network.")] = "127.0.0.1",
) -> None:
    """Serve the HTML page, updating in place as the run grows, and /metrics for Prometheus."""
    from flowmap.live.serve import serve as run_serve
    from flowmap.model.run import resolve

    path = resolve(run)
    if not is_loopback(bind):
        sys.stderr.write(f"flowmap: warning: serving on {bind}, beyond this machine: the page and "
                         "/metrics show the run's owner, seam and payload names and shapes\n")
    run_serve(path, bind, port)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
