"""flowmap's layers, and its import graph read from the source.

The contract (docs/architecture.md draws it): each layer imports only the layers
below it, and no modules import each other in a circle. `tests/unit/test_layers.py`
holds the tree to it; `scripts/house.py` prints the same figures for any checkout.
The graph is read from the AST, never by importing, and counts every import: at the
top, inside a function, under TYPE_CHECKING, each is an arrow a reader must follow.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator

import networkx as nx

# Source folders and the names they are installed under (setup.py maps them).
ROOTS = {"flowmap": "flowmap", "cli": "flowmap.cli", "trainer": "flowmap.trainer"}

# Top to bottom. A module belongs to the layer of its longest listed prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("commands", ("flowmap.cli", "flowmap.__main__", "flowmap.discover", "flowmap.live")),
    ("reporters", ("flowmap.reporters",)),
    ("findings", ("flowmap.findings",)),
    ("check", ("flowmap.check",)),
    ("model", ("flowmap.model",)),
    ("read", ("flowmap.read",)),
    # In the traced process: what starts tracing (the `tracing()` block, a child's boot), what
    # it installs (framework and transport integrations, seam maps), and capture itself.
    ("tracing", ("flowmap.run_tracing", "flowmap.capture._boot")),
    ("integrations", ("flowmap.integrations", "flowmap.seams")),
    ("capture", ("flowmap.capture",)),
    ("writer", ("flowmap.writer",)),
    ("base", ("flowmap.rundir", "flowmap.trace_format", "flowmap.environment", "flowmap.errors",
              "flowmap.units", "flowmap.safe_read", "flowmap.strict_json", "flowmap.gc_pause")),
]
# The public facade (`import flowmap`: hop, tracing, load) reaches into every layer, and the
# built-in trainer is a user of that facade only: both stand outside the layers.
FACADE = "flowmap"
USERS = ("flowmap.trainer",)


def modules(root: str) -> dict[str, str]:
    """Import name -> file, for every module of the library, the CLI and the trainer."""
    out: dict[str, str] = {}
    for folder, package in ROOTS.items():
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, base)
            prefix = package if rel == "." else package + "." + rel.replace(os.sep, ".")
            for f in sorted(filenames):
                if f.endswith(".py"):
                    out[prefix if f == "__init__.py" else f"{prefix}.{f[:-3]}"] = os.path.join(dirpath, f)
    return out


def imported_names(path: str, module: str) -> Iterator[str]:
    """Every module name `module` imports, resolved; `from a import b` yields `a.b` and `a`."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(root: str) -> nx.DiGraph:
    """Module -> each project module it imports (a submodule, not its package, where named)."""
    mods = modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    for name, path in mods.items():
        for target in imported_names(path, name):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)  # importing a submodule runs its package: no arrow
    return graph


def circles(graph: nx.DiGraph) -> list[list[str]]:
    """Groups of two or more modules that reach each other: each is one import circle."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def layer_of(module: str) -> int | None:
    """The index of `module`'s layer in LAYERS (0 is the top), None outside the layers."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), index)
    return None if best is None else best[1]


def arrows_against_layers(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Imports that break the contract: a layer importing one above it, the library
    importing the trainer, the trainer importing anything of flowmap but its facade."""
    out = []
    for src, dst in sorted(graph.edges):
        if src.startswith(USERS):
            if dst != FACADE and not dst.startswith(USERS):
                out.append((src, dst))
            continue
        if dst.startswith(USERS):
            out.append((src, dst))
            continue
        a, b = layer_of(src), layer_of(dst)
        if a is not None and b is not None and b < a:
            out.append((src, dst))
    return out


def unplaced(graph: nx.DiGraph) -> list[str]:
    """Library modules that no layer names (a new package must be placed in LAYERS)."""
    return sorted(m for m in graph if m != FACADE and not m.startswith(USERS) and layer_of(m) is None)
