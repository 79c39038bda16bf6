"""Count the import circles among the modules of flowmap/, to measure a restructure before and after.

Every import counts — at the top, inside a function, under TYPE_CHECKING —
since each is an arrow a reader must follow; an import of a package's
submodule points at the submodule, not the package. A circle is a group of
modules that reach each other (a strongly connected component of the graph).

Usage: python scripts/import_cycles.py [ROOT]   (ROOT: a checkout, default .)
"""

from __future__ import annotations

import ast
import os
import sys

import networkx as nx


def modules(root: str) -> dict[str, str]:
    """Dotted module name -> file path, for every module under ROOT/flowmap."""
    out: dict[str, str] = {}
    for folder, _, files in os.walk(os.path.join(root, "flowmap")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                out[dotted.removesuffix(".__init__")] = path
    return out


def graph(root: str) -> nx.DiGraph:
    mods = modules(root)

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    g = nx.DiGraph()
    for mod, path in mods.items():
        g.add_node(mod)
        package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package
                    for _ in range(node.level - 1):
                        up = up.rpartition(".")[0]
                    base = f"{up}.{base}" if base else up
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for target in targets:
                hit = known(target) if target.startswith("flowmap") else None
                if hit and hit != mod:
                    g.add_edge(mod, hit)
    return g


def main(root: str) -> int:
    circles = sorted((sorted(c) for c in nx.strongly_connected_components(graph(root))
                      if len(c) > 1), key=lambda c: (-len(c), c))
    print(f"{len(circles)} import circles, {sum(map(len, circles))} modules in them")
    for c in circles:
        print(f"  {len(c)}: {' '.join(c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
