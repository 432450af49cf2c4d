"""The work-size formula language: C integer semantics, exact errors, and no crash on any text."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from customlayers.errors import FormulaError
from customlayers.config.formulas import (MAX_DEPTH, evaluate_work_sizes, parse_formula,
                                       parse_formula_list)

ENV = {"B": 1, "F": 3, "Y": 224, "X": 224}


@pytest.mark.parametrize("text, value", [
    ("X", 224), ("x", 224), ("B*F*Y*X", 150528), ("(Y+7)/8*8", 224),
    ("7/2", 3), ("-7/2", -3), ("7/-2", -3), ("-7/-2", 3),          # truncation toward zero
    ("7%2", 1), ("-7%2", -1), ("7%-2", 1), ("-7%-2", -1),          # sign of the dividend
    ("-X", -224), ("--X", 224), ("+X", 224), ("2+3*4", 14), ("(2+3)*4", 20), ("10-4-3", 3),
    ("100/10/5", 2), ("X%7", 0), ("  X  *  2  ", 448), ("\tY\n", 224), ("007", 7),
])
def test_values(text, value):
    assert parse_formula(text).evaluate(ENV) == value


def test_python_floor_division_is_not_used():
    # Python: -7 // 2 == -4 and -7 % 2 == 1; C: -3 and -1
    assert parse_formula("(Y-231)/2").evaluate(ENV) == -3
    assert parse_formula("(Y-231)%2").evaluate(ENV) == -1


def test_list_whitespace_and_variables():
    fs = parse_formula_list(" X , Y ,B*F ")
    assert [f.text for f in fs] == ["X", "Y", "B*F"]
    assert [f.variables for f in fs] == [("X",), ("Y",), ("B", "F")]
    assert evaluate_work_sizes(fs, ENV) == (224, 224, 3)


def test_long_chain_does_not_recurse():
    assert parse_formula("+".join(["1"] * 5000)).evaluate({}) == 5000


def _error(text, **kw) -> FormulaError:
    with pytest.raises(FormulaError) as info:
        parse_formula_list(text, **kw)
    return info.value


@pytest.mark.parametrize("text, message, column", [
    ("X*W", "unknown token 'W': the variables are B, F, Y, X (either case)", 3),
    ("X$2", "unknown token '$': expected a number, B, F, Y, X, an operator + - * / % or "
            "parentheses", 2),
    ("(X+1", "unbalanced parentheses: '(' is never closed", 1),
    ("X+1)", "unbalanced parentheses: ')' without a matching '('", 4),
    ("1,,2", "entry 2 is empty: expected a formula", 3),
    ("X+", "formula ends after '+': expected a number, one of B F Y X, or '('", 3),
    ("X*/2", "expected a number, one of B F Y X, or '(', found '/'", 3),
    ("X Y", "expected an operator, found 'Y'", 3),
    ("2X", "unknown token '2X': a number cannot run into letters", 1),
    ("1,2,3,4", "4 entries, at most 3 allowed", 6),
    ("", "the list is empty: expected a formula", 1),
])
def test_parse_errors(text, message, column):
    e = _error(text)
    assert e.message == message
    assert e.formula == text
    assert e.position == column - 1


def test_error_text_names_formula_and_column():
    assert str(_error("X*W")) == ("unknown token 'W': the variables are B, F, Y, X (either case) "
                                  "in formula 'X*W' at column 3")


def test_depth_is_capped_with_a_clear_error():
    e = _error("(" * 10000 + "X" + ")" * 10000)
    assert e.message == f"nesting deeper than {MAX_DEPTH} levels"
    assert _error("-" * 10000 + "1").message == f"nesting deeper than {MAX_DEPTH} levels"


@pytest.mark.parametrize("text, message", [
    ("X/(Y-224)", "division by zero with X=224, Y=224"),
    ("X % (B-1)", "modulo by zero with X=224, B=1"),
])
def test_division_by_zero_gives_the_values(text, message):
    with pytest.raises(FormulaError) as info:
        parse_formula(text).evaluate(ENV)
    assert info.value.message == message
    assert info.value.position == text.index("/" if "/" in text else "%")


def test_work_sizes_must_be_positive():
    f = parse_formula("X-224")
    assert f.evaluate(ENV) == 0
    with pytest.raises(FormulaError, match=r"the result is 0 with X=224; expected a positive"):
        evaluate_work_sizes([f], ENV)


def test_list_positions_are_per_entry_at_evaluation():
    fs = parse_formula_list("X,  Y/0")
    with pytest.raises(FormulaError) as info:
        fs[1].evaluate(ENV)
    assert (info.value.formula, info.value.position) == ("Y/0", 1)


def test_vpu_dialect_functions_and_names():
    f = parse_formula("floor(X/3.0) + ceil(ratio) + round(2.5) + abs(-2) + sqrt(16)",
                      functions=True, extra_names=True)
    assert f.variables == ("X", "ratio")
    assert f.evaluate({"X": 10, "ratio": 0.5}) == 3 + 1 + 3 + 2 + 4
    with pytest.raises(FormulaError, match="unknown function 'log'"):
        parse_formula("log(X)", functions=True)
    with pytest.raises(FormulaError, match="'ratio' has no value here"):
        f.evaluate({"X": 1})
    # without the dialect, a name and a fraction are refused
    with pytest.raises(FormulaError):
        parse_formula("ratio")
    with pytest.raises(FormulaError):
        parse_formula("1.5")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("BFYXbfyxq0123456789+-*/%(), \t.$_é")), max_size=60),
       st.booleans())
def test_any_text_raises_only_formula_error(text, dialect):
    env = {"B": 1, "F": 0, "Y": 2, "X": 7, "q": 0}
    try:
        for f in parse_formula_list(text, functions=dialect, extra_names=dialect):
            f.evaluate(env)
            f.evaluate(env, positive=True)
    except FormulaError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_unicode_raises_only_formula_error(text):
    try:
        parse_formula(text, functions=True, extra_names=True).evaluate({"X": 3})
    except FormulaError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6).filter(lambda v: v != 0))
def test_c_division_matches_c(a, b):
    f = parse_formula("X/Y")
    m = parse_formula("X%Y")
    q = int(a / b) if abs(a) < 2**52 else None   # truncation toward zero
    assert f.evaluate({"X": a, "Y": b}) == q
    assert m.evaluate({"X": a, "Y": b}) == a - b * q


@pytest.mark.parametrize("texts, message", [
    ("9223372036854775807+1", "the result is 9223372036854775808; a work size is at most "
                              "4294967295 (2**32-1) in formula '9223372036854775807+1'"),
    ("X*4294967296", "the result is 962072674304 with X=224; a work size is at most 4294967295 "
                     "(2**32-1) in formula 'X*4294967296'"),
    ("65536,65536,X*2", "the sizes 65536, 65536, 448 make 1924145348608 work items; at most "
                        "1099511627776 (2**40) are allowed in formula '65536,65536,X*2'"),
])
def test_work_sizes_beyond_what_drivers_take_are_refused(texts, message):
    # PoCL aborts the whole process on a global size near 2**63: never hand it one
    with pytest.raises(FormulaError) as info:
        evaluate_work_sizes(parse_formula_list(texts), ENV)
    assert str(info.value) == message


def test_work_sizes_at_the_limits_are_accepted():
    assert evaluate_work_sizes(parse_formula_list("4294967295"), ENV) == (4294967295,)
    assert evaluate_work_sizes(parse_formula_list("1048576,1048576"), ENV) == (2**20, 2**20)


@pytest.mark.parametrize("env, message", [
    ({"X": float("inf"), "Y": 2}, "'X' is inf; a value in a formula is finite and at most "
                                  "9223372036854775808 in magnitude"),
    ({"X": float("nan"), "Y": 2}, "'X' is nan;"),
    ({"X": 10 ** 30, "Y": 2}, "'X' is about 10**30;"),
    ({"X": -(10 ** 5000), "Y": 2}, "'X' is about -10**5000;"),
    ({"X": 7, "Y": 0, "B": 10 ** 5000}, "modulo by zero with X=7, Y=0, B=about 10**5000"),
])
def test_values_from_outside_are_held_to_the_bounds(env, message):
    """An attribute of 1e999 reached math.fmod(inf, ...) (ValueError), and a message listing a
    5,000-digit value met str()'s limit of 4,300 digits (ValueError)."""
    from customlayers.config.formulas import parse_formula
    with pytest.raises(FormulaError) as e:
        parse_formula("X % Y + B").evaluate(env)
    assert message in str(e.value)
