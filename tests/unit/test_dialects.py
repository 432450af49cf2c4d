"""A descriptor dialect is a plugin: config/dialects.py's table (with its runtime and CLI
companions) is the one place that tells dialects apart; nothing else compares spec.kind."""
import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

import customlayers
from customlayers.cli.layer_commands.dialects import CLI_DIALECTS, cli_of
from customlayers.config.dialects import DIALECTS, Dialect, dialect_of
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
    assert set(DIALECTS) == set(RUNTIME_DIALECTS) == set(CLI_DIALECTS) == {"SimpleGPU", "MVCL"}
    for name, dialect in DIALECTS.items():
        assert dialect.name == name


def test_a_new_dialect_entry_is_picked_up_by_the_table(monkeypatch):
    toy = Dialect("Toy", one_kernel=False, shape_formula=False)
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
