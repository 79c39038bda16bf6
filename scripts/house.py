"""Figures of the house for any checkout: import circles, arrows against the layers, long files, `Any`.

    python scripts/house.py [ROOT]

The layers and the import graph come from tests/layers.py (the contract CI holds the
tree to); issue 24's before-and-after figures were measured with this script.
"""

from __future__ import annotations

import ast
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from layers import arrows_against_layers, circles, import_graph, modules  # noqa: E402

LONG_FILE_LINES = 400


def long_files(root: str) -> list[tuple[str, int]]:
    sizes = [(os.path.relpath(p, root), sum(1 for _ in open(p, encoding="utf-8")))
             for p in modules(root).values()]
    return sorted(((p, n) for p, n in sizes if n > LONG_FILE_LINES), key=lambda x: -x[1])


def any_count(root: str) -> int:
    """Uses of `Any` in the library (flowmap/, not the CLI or the trainer)."""
    total = 0
    for name, path in modules(root).items():
        if not name.startswith(("flowmap.cli", "flowmap.trainer")):
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            total += sum(1 for n in ast.walk(tree)
                         if (isinstance(n, ast.Name) and n.id == "Any")
                         or (isinstance(n, ast.Attribute) and n.attr == "Any"))
    return total


def main(root: str) -> None:
    graph = import_graph(root)
    print(f"modules: {graph.number_of_nodes()}, import arrows: {graph.number_of_edges()}")
    found = circles(graph)
    print(f"import circles: {len(found)}")
    for c in found:
        print(f"  {len(c)} modules: {', '.join(c)}")
    against = arrows_against_layers(graph)
    print(f"arrows against the layers: {len(against)}")
    for src, dst in against:
        print(f"  {src} -> {dst}")
    longs = long_files(root)
    print(f"files over {LONG_FILE_LINES} lines: {len(longs)}")
    for path, n in longs:
        print(f"  {path}: {n}")
    print(f"`Any` in the library: {any_count(root)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
