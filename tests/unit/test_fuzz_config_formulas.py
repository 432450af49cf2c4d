"""Property-based fuzzing of the descriptor loader and the formula language, bounded to a few
seconds each. The generators and checks live in tests/fuzz_inputs.py, shared with the long
campaign (scripts/fuzz_configs.py); here hypothesis drives them and shrinks what fails.

Loader: a mutated example or test config (attributes, element names, text, inserted and deleted
elements, other encodings, flipped bytes) loads with complete, one-line, located diagnostics, and
raise_if_errors raises ConfigError or nothing: never another exception.
Formulas: a random formula over the grammar has the value of an independent C-semantics
reference (or FormulaError where the reference refuses); with junk mixed in, FormulaError or a
value, never another exception."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz_inputs as fi
from customlayers.errors import ConfigError, FormulaError

FAST = settings(deadline=None, suppress_health_check=list(HealthCheck))


def test_the_seeds_load_as_their_authors_meant():
    rich = fi.seeds()[0]
    assert fi.check_config(fi.ConfigInput(rich.text, rich.sources, rich.name, name="r.xml")
                           ).layers.keys() == {"Rich", "Second"}
    assert len(fi.seeds()) >= 10  # the examples and the test configs are all in


@settings(FAST, max_examples=800)
@given(st.randoms(use_true_random=False))
def test_mutated_configs_give_located_diagnostics_or_config_error(rng):
    item = fi.mutated_config(rng)
    try:
        fi.check_config(item)
    except ConfigError as e:
        assert e.diagnostics and all(d.line >= 1 for d in e.diagnostics)


@pytest.mark.parametrize("tree, value", [
    (("bin", "/", ("num", -7, "-7"), ("num", 2, "2")), -3),
    (("bin", "%", ("neg", ("num", 7, "7")), ("num", 2, "2")), -1),
    (("bin", "%", ("num", 7, "7"), ("neg", ("num", 2, "2"))), 1),
    (("bin", "/", ("call", "floor", ("num", 7.5, "7.5")), ("num", 2, "2")), 3.5),
    (("call", "round", ("num", 0.49999999999999994, "")), 0.0),
    (("call", "round", ("num", -2.5, "")), -3.0),
    (("call", "ceil", ("num", -2.5, "")), -2.0),
])
def test_the_c_reference_itself(tree, value):
    got = fi.reference(tree, {})
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text, value", [
    ("floor(7.5)/2*2", 7.0),            # floor gives a double, as in C (it gave 6)
    ("round(0.49999999999999994)", 0.0),
    ("-7/2 + -7%2", -4),
])
def test_formula_values_follow_c(text, value):
    from customlayers.config.formulas import parse_formula
    got = parse_formula(text, functions=True).value({})
    assert got == value and type(got) is type(value)


@settings(FAST, max_examples=1000)
@given(st.randoms(use_true_random=False))
def test_random_formulas_equal_the_c_reference(rng):
    item = fi.random_formula(rng)
    try:
        fi.check_formula(item)
    except FormulaError:
        pass  # the reference refused too (check_formula asserts that), or junk was refused
