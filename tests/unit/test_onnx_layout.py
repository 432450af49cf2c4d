"""graph/onnx/ holds no import circle (the op modules once imported the module that imported
them back), each of its modules imports on its own in a fresh interpreter, and the reader asks
one table of translations, each op registered once."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from customlayers.graph.onnx import translate
from customlayers.graph.onnx.table import TRANSLATIONS, translated_ops

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "customlayers.graph.onnx"
MODULES = sorted(".".join(p.relative_to(ROOT / "customlayers/graph/onnx").with_suffix("").parts)
                 for p in (ROOT / "customlayers/graph/onnx").rglob("*.py") if p.stem != "__init__")


def test_no_module_imports_one_that_imports_it_back():
    grimp = pytest.importorskip("grimp")     # import-linter's graph builder (a test dependency)
    graph = grimp.build_graph("customlayers")
    names = [f"{PACKAGE}.{m}" for m in MODULES]
    circles = [(a, b) for a in names for b in names if a < b
               and graph.chain_exists(importer=a, imported=b)
               and graph.chain_exists(importer=b, imported=a)]
    assert circles == []


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    # first of its room: no name it needs may be waiting on a module half imported
    done = subprocess.run([sys.executable, "-c", f"import {PACKAGE}.{module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_table_holds_every_registered_translation_and_the_reader_asks_it():
    from customlayers.graph.onnx import reader
    assert reader.TRANSLATIONS is TRANSLATIONS is translate.REGISTERED
    # the plain renames and the elementwise ops are in the one table with the rest
    for op in ("Relu", "Sin", "Softplus", "Add", "Sum", "Div", "Conv", "Reshape", "ReduceMean"):
        assert op in TRANSLATIONS
    assert translated_ops() == sorted(TRANSLATIONS)


def test_an_op_registered_twice_is_refused():
    # two translations of one op (as Div was, in two tables) would leave one silently unused
    with pytest.raises(ValueError, match="ONNX op Relu has two translations"):
        translate.translates("Relu")(lambda r, node, name, attrs: None)
    assert TRANSLATIONS["Relu"].__name__ == "_renamed_ReLU"
