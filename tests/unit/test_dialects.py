"""A descriptor dialect is a plugin: config/dialects.py's table (with its runtime and CLI
companions) is the one place that tells dialects apart; nothing else compares spec.kind."""
import ast
import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest

import customlayers
from customlayers.cli.layer_commands.dialects import CLI_DIALECTS, cli_of
from customlayers.config import load_config_string
from customlayers.config.dialects import DIALECTS, Dialect, dialect_of, dialect_of_element
from customlayers.runtime.layers.dialects import RUNTIME_DIALECTS, runtime_of

PACKAGE = Path(customlayers.__file__).parent
TABLES = {PACKAGE / "config" / "dialects.py", PACKAGE / "runtime" / "dialects.py",
          PACKAGE / "cli" / "dialects.py"}


def _names_a_dialect(node: ast.AST) -> bool:
    """A string constant that is a dialect's name, alone or in a tuple/list/set literal."""
    if isinstance(node, ast.Constant):
        return node.value in DIALECTS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_dialect(e) for e in node.elts)
    return False


def _is_kind(node: ast.AST) -> bool:
    """spec.kind, layer.kind, ex.kind, ... (not dtype.kind, t.kind: those are other kinds)."""
    return isinstance(node, ast.Attribute) and node.attr == "kind" and \
        isinstance(node.value, ast.Name) and node.value.id in ("spec", "layer", "ex", "example")


def dialect_branches() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in TABLES:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare) and any(
                    _names_a_dialect(o) or _is_kind(o) for o in [node.left, *node.comparators]):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_no_dialect_branch_outside_the_dialect_tables():
    assert dialect_branches() == []


def test_every_dialect_has_its_runtime_and_cli_sides():
    assert set(DIALECTS) == set(CLI_DIALECTS) == {"SimpleGPU", "MVCL"}
    assert {d.adapter for d in DIALECTS.values()} == set(RUNTIME_DIALECTS)
    for name, dialect in DIALECTS.items():
        assert dialect.name == name
        # the names config/ gives for what lives above it resolve: the adapter in the runtime's
        # table, the program generation in jit/
        adapter = runtime_of(SimpleNamespace(kind=name)).adapter()
        assert adapter.__name__ == dialect.adapter
        module, function = dialect.program.split(":")
        assert callable(getattr(importlib.import_module(f"customlayers.jit.{module}"), function))


def test_each_dialect_lives_in_its_own_folder_with_its_spec_and_checks():
    for dialect in DIALECTS.values():
        folder = Path(importlib.import_module(dialect.spec.__module__).__file__).parent
        assert folder.parent == PACKAGE / "config"
        assert Path(importlib.import_module(dialect.collector.__module__).__file__).parent == \
            folder
        assert (PACKAGE / "schemas" / dialect.schema).is_file()


def test_an_element_goes_to_its_dialect_and_an_unknown_type_to_simplegpu():
    assert dialect_of_element("MVCL") is DIALECTS["MVCL"]
    assert dialect_of_element("SimpleGPU") is DIALECTS["SimpleGPU"]
    assert dialect_of_element(None) is DIALECTS["SimpleGPU"]
    configs = load_config_string('<CustomLayer name="A" type="Simple" version="1"/>')
    assert "CL020" in [d.code for d in configs.diagnostics.errors]     # the type, by the schema


def test_no_config_folder_holds_more_than_about_twelve_modules():
    for folder in [PACKAGE / "config", *(p.parent for p in (PACKAGE / "config").glob(
            "*/__init__.py"))]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 12, (folder, sorted(p.name for p in modules))


def test_a_new_dialect_entry_is_picked_up_by_the_table(monkeypatch):
    toy = Dialect("Toy", one_kernel=False, shape_formula=False, schema="toy.schema.json",
                  collector=object, spec=object, program="toy:generate", adapter="ToyLayer")
    monkeypatch.setitem(DIALECTS, "Toy", toy)
    spec = SimpleNamespace(kind="Toy")
    assert dialect_of(spec) is toy
    assert runtime_of(spec) is None      # the registry says this version cannot run it
    toy_cli = object()
    monkeypatch.setitem(CLI_DIALECTS, "Toy", toy_cli)
    assert cli_of(spec) is toy_cli


def test_the_shipped_dialects_say_what_they_are():
    assert dialect_of(SimpleNamespace(kind="SimpleGPU")).one_kernel
    assert not dialect_of(SimpleNamespace(kind="MVCL")).one_kernel
    with pytest.raises(KeyError):
        dialect_of(SimpleNamespace(kind="Nope"))
