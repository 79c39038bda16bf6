"""The import contract: each layer imports only those below it, and nothing in a circle.

The layers are the table in tests/layers.py (docs/architecture.md draws it). A new
package must be placed in it, so the contract cannot be passed by omission.
"""

from __future__ import annotations

import os

import networkx as nx
from layers import LAYERS, arrows_against_layers, circles, import_graph, layer_of, unplaced

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_no_modules_import_each_other_in_a_circle():
    assert circles(import_graph(ROOT)) == []


def test_no_layer_imports_one_above_it():
    assert arrows_against_layers(import_graph(ROOT)) == []


def test_every_library_module_has_a_layer():
    assert unplaced(import_graph(ROOT)) == []


def test_the_checks_see_what_they_forbid():
    """A reporter imported by the model, a circle and an unplaced package are all caught."""
    graph = nx.DiGraph([("flowmap.model.view", "flowmap.reporters.html"),
                        ("flowmap.read.reader", "flowmap.read.halves"),
                        ("flowmap.read.halves", "flowmap.read.reader"),
                        ("flowmap.trainer.driver", "flowmap.capture.tracer"),
                        ("flowmap.capture.tracer", "flowmap.trainer.model")])
    graph.add_node("flowmap.newthing.module")
    assert arrows_against_layers(graph) == [
        ("flowmap.capture.tracer", "flowmap.trainer.model"),
        ("flowmap.model.view", "flowmap.reporters.html"),
        ("flowmap.trainer.driver", "flowmap.capture.tracer"),
    ]
    assert circles(graph) == [["flowmap.read.halves", "flowmap.read.reader"]]
    assert unplaced(graph) == ["flowmap.newthing.module"]


def test_a_module_takes_the_layer_of_its_longest_prefix():
    names = [name for name, _ in LAYERS]
    assert names[layer_of("flowmap.capture.tracer")] == "capture"  # type: ignore[index]
    assert names[layer_of("flowmap.reporters.check_formats.text")] == "reporters"  # type: ignore[index]
    assert layer_of("flowmap.trainer.driver") is None
