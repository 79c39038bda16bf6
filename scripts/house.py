"""Figures of the house: import circles, arrows against the layers, long files, `Any`.

    python scripts/house.py [ROOT]

Reads the source as text (the AST), imports nothing, so it measures any checkout,
an old one included: issue 24's before-and-after figures come from here, and
tests/unit/test_layers.py holds the layers to the same table (`LAYERS`).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator

import networkx as nx

# Source folders and the import names they have installed (setup.py maps them).
ROOTS = {"flowmap": "flowmap", "cli": "flowmap.cli", "trainer": "flowmap.trainer"}
LONG_FILE_LINES = 400


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
                    name = prefix if f == "__init__.py" else f"{prefix}.{f[:-3]}"
                    out[name] = os.path.join(dirpath, f)
    return out


def imported_names(path: str, module: str) -> Iterator[str]:
    """Every module name `module` imports, at any depth of its code (lazy imports are arrows
    too), resolved relative to it; `from a import b` yields `a.b` and `a`."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"


def import_graph(root: str) -> nx.DiGraph:
    """Module -> module it imports, within the project."""
    mods = modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    for name, path in mods.items():
        for target in imported_names(path, name):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)  # a package's own __init__ is not an arrow
    return graph


def circles(graph: nx.DiGraph) -> list[list[str]]:
    """The strongly connected groups of two or more modules: each is one circle of imports."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def long_files(root: str) -> list[tuple[str, int]]:
    out = []
    for path in modules(root).values():
        n = sum(1 for _ in open(path, encoding="utf-8"))
        if n > LONG_FILE_LINES:
            out.append((os.path.relpath(path, root), n))
    return sorted(out, key=lambda x: -x[1])


def any_count(root: str) -> int:
    """Uses of `Any` in the library (flowmap/), as a name in annotations or code."""
    total = 0
    for name, path in modules(root).items():
        if name.startswith(("flowmap.cli", "flowmap.trainer")):
            continue
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        total += sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "Any")
        total += sum(1 for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "Any")
    return total


def main(root: str) -> None:
    graph = import_graph(root)
    found = circles(graph)
    print(f"modules: {graph.number_of_nodes()}, import arrows: {graph.number_of_edges()}")
    print(f"import circles: {len(found)}")
    for c in found:
        print(f"  {len(c)} modules: {', '.join(c)}")
    longs = long_files(root)
    print(f"files over {LONG_FILE_LINES} lines: {len(longs)}")
    for path, n in longs:
        print(f"  {path}: {n}")
    print(f"`Any` in the library: {any_count(root)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
