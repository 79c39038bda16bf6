"""The import contract: each layer imports only those below it, and nothing in a circle.

The layers are the table in tests/layers.py (docs/architecture.md draws it). A new
package must be placed in it, so the contract cannot be passed by omission.
"""

from __future__ import annotations

import os

import networkx as nx
from layers import (
    LAYERS,
    arrows_against_layers,
    circles,
    environment_names_outside,
    extension_modules,
    import_graph,
    layer_of,
    private_names_used,
    unplaced,
)

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


def test_no_module_takes_a_private_name_from_another():
    assert private_names_used(ROOT) == []


def test_the_c_twins_are_modules_with_public_names():
    """The modules built from C are found by the `.c` source beside them, and each is named
    like any module, so its wrapper imports no private name."""
    twins = extension_modules(ROOT)
    assert {"flowmap.capture.describers.cwalk", "flowmap.capture.describers.ccolumns",
            "flowmap.writer.cids", "flowmap.capture.csigterm", "flowmap.discover.crelay",
            "flowmap.capture.cinterned", "flowmap.capture.ctext"} == twins


def test_the_private_check_sees_an_import_and_a_read(tmp_path):
    """A private name imported from another module, or read off one, is caught; a module's
    own private names and a private alias of a public name are not; a C module named `_x`
    counts as any private name."""
    pkg = tmp_path / "flowmap"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_twin.c").write_text("")
    (pkg / "a.py").write_text("_cell = 1\ndef _helper():\n    return _cell\n")
    (pkg / "b.py").write_text("from flowmap.a import _helper\nfrom flowmap import a\n"
                              "from flowmap import _twin\nfrom flowmap.a import _cell as c\n"
                              "x = a._cell + c\n")
    (pkg / "c.py").write_text("from flowmap.a import _helper as public_alias\n"
                              "from flowmap import a as _a\ny = _a\n")
    assert private_names_used(str(tmp_path)) == [
        ("flowmap.b", "flowmap._twin"), ("flowmap.b", "flowmap.a._cell"),
        ("flowmap.b", "flowmap.a._helper"), ("flowmap.c", "flowmap.a._helper"),
    ]


def test_flowmap_variables_are_named_in_the_environment_module_only():
    assert environment_names_outside(ROOT) == []


def test_the_environment_check_sees_a_stray_read(tmp_path):
    """A variable read by its name outside flowmap/environment.py is caught; a docstring that
    mentions one is prose, not a read."""
    pkg = tmp_path / "flowmap"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""Set FLOWMAP_RUNS to choose."""\n')
    (pkg / "stray.py").write_text('import os\nx = os.environ.get("FLOWMAP_RUN_DIR")\n')
    (pkg / "environment.py").write_text('RUN_DIR = "FLOWMAP_RUN_DIR"\n')
    assert environment_names_outside(str(tmp_path)) == [("flowmap.stray", "FLOWMAP_RUN_DIR")]
