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
    # In the traced process: what starts tracing (`flowmap.launch`: the one start the CLI,
    # the `tracing()` block and a child's boot share), the framework and transport
    # integrations it arms (the Ray one reads the seam maps' Ray targets), the seam maps
    # (a map's result watchers are registered by the integrations, never imported), capture.
    ("tracing", ("flowmap.launch",)),
    ("integrations", ("flowmap.integrations",)),
    ("seams", ("flowmap.seams",)),
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


def extension_modules(root: str) -> set[str]:
    """The C twins (`cwalk.c` beside the Python it stands in for): modules built from C, so
    with no `.py` of their own, named and checked like any other module."""
    out: set[str] = set()
    for folder, package in ROOTS.items():
        base = os.path.join(root, folder)
        for dirpath, _, filenames in os.walk(base):
            rel = os.path.relpath(dirpath, base)
            prefix = package if rel == "." else package + "." + rel.replace(os.sep, ".")
            out.update(f"{prefix}.{f[:-2]}" for f in filenames if f.endswith(".c"))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_used(root: str) -> list[tuple[str, str]]:
    """(module, name) for each private name (`_x`) a module takes from another module of the
    project: imported (`from a import _x`, `import a._x`), or read off a module it imported
    (`a._x`). A C twin (`extension_modules`) counts like a module written in Python."""
    mods = modules(root)
    extensions = extension_modules(root)
    out: set[tuple[str, str]] = set()
    for name, path in mods.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        bound: dict[str, str] = {}  # local name -> the project module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods or alias.name in extensions:
                        parts = alias.name.split(".")
                        if any(map(_private, parts)):
                            out.add((name, alias.name))
                        if alias.asname:
                            bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base not in mods:
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in mods or full in extensions:
                        bound[alias.asname or alias.name] = full
                    if _private(alias.name) and base != name:
                        out.add((name, full))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and _private(node.attr) and node.value.id in bound
                    and bound[node.value.id] != name):
                out.add((name, f"{bound[node.value.id]}.{node.attr}"))
    return sorted(out)


# The module that names every FLOWMAP_* variable, and the boot module, which reads three of
# them with `os` alone before it knows flowmap is wanted (flowmap/environment.py says why).
ENVIRONMENT = ("flowmap.environment", "flowmap.launch.boot.sitecustomize")


def environment_names_outside(root: str) -> list[tuple[str, str]]:
    """(module, variable) for each `FLOWMAP_*` name spelled out beyond `ENVIRONMENT`: every
    other module reads a variable through `flowmap.environment`'s constants."""
    out = []
    for name, path in modules(root).items():
        if name in ENVIRONMENT:
            continue
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        out += [(name, n.value) for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and n.value.startswith("FLOWMAP_") and n.value[8:].replace("_", "").isupper()]
    return sorted(set(out))
