"""Seam maps shipped with flowmap for pipelines people cannot edit (`--preset trl`).

A preset is an ordinary seam-map YAML file in this folder, written from the
framework's own source; `flowmap trace --preset NAME` is `--seams` with its path.
"""

from __future__ import annotations

import os

from flowmap.errors import UsageError

HERE = os.path.dirname(os.path.abspath(__file__))


def available() -> list[str]:
    """Names of the shipped presets."""
    return sorted(n[: -len(".yaml")] for n in os.listdir(HERE) if n.endswith(".yaml"))


def preset_path(name: str) -> str:
    """The seam-map file of preset `name`; a usage error naming the choices otherwise."""
    path = os.path.join(HERE, f"{name}.yaml")
    if not os.path.isfile(path):
        raise UsageError(f"no preset named {name!r}; choose one of: {', '.join(available())}")
    return path
