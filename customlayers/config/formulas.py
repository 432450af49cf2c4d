"""The work-size formula language (SPEC section 4), parsed by hand and never `eval`ed.

    entry   := sum
    sum     := product (('+' | '-') product)*
    product := unary (('*' | '/' | '%') unary)*
    unary   := ('-' | '+') unary | atom
    atom    := NUMBER | NAME | NAME '(' sum ')' | '(' sum ')'

Variables are `B F Y X` in either case (the four DIMS of the `dim` tensor). Arithmetic follows C
on integers: `/` truncates toward zero and `%` takes the sign of the dividend (Python's `//` and
`%` round toward minus infinity instead). OpenVINO crashes on `X%0` and on trailing whitespace;
here every problem is a `FormulaError` with the formula text and the column.

A SimpleGPU layer's formulas may also name its parameters, the `param` of its Defines (our
extension, `params=`): `global="X/stride,Y,B*F"` takes the layer's `stride` attribute (else the
Define's default), so a stride that gives no positive work size is an error before any launch.
The VPU dialect (SPEC section 6) allows layer parameters by name (`extra_names=True`) and the
functions floor ceil round abs sqrt (`functions=True`); numbers with a fraction come with it, and
an operation with a float operand is done in float, as C would promote it.

A formula is compiled to postfix code and evaluated with an explicit stack, so a long chain like
`1+1+...+1` never recurses; nesting of parentheses and unary signs is capped at MAX_DEPTH.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from ..errors import FormulaError
from .messages import clipped

VARIABLES = ("B", "F", "Y", "X")
FUNCTIONS = ("floor", "ceil", "round", "abs", "sqrt")
MAX_DEPTH = 64          # parentheses and unary signs nested deeper than this are refused
MAX_MAGNITUDE = 2 ** 63  # a value beyond this cannot be a work size or a dim; stop growing there
# Work sizes the drivers can take. PoCL aborts the process (not an error code) on a global size
# near 2**63, and no device runs 2**40 work items in reasonable time: refuse both up front.
MAX_WORK_SIZE = 2 ** 32 - 1   # one global or local entry
MAX_WORK_ITEMS = 2 ** 40      # all entries of one global (or local) size multiplied

_OPERATORS = "+-*/%"
_EXPECTED_ATOM = "a number, one of B F Y X, or '('"


@dataclass(frozen=True)
class _Token:
    kind: str      # "num" | "name" | "op" | "(" | ")" | "end"
    text: str
    pos: int       # 0-based offset in the formula text


@dataclass(frozen=True)
class _Instr:
    op: str        # "num" | "var" | "neg" | "call" | one of + - * / %
    arg: object
    pos: int


def _tokenize(text: str, start: int, end: int, functions: bool) -> list[_Token]:
    tokens: list[_Token] = []
    i = start
    while i < end:
        c = text[i]
        if c.isspace():
            i += 1
        elif c.isascii() and c.isdigit() or (functions and c == "." and i + 1 < end
                                            and text[i + 1].isascii() and text[i + 1].isdigit()):
            j = i
            while j < end and text[j].isascii() and (text[j].isdigit() or (functions and text[j] == ".")):
                j += 1
            number = text[i:j]
            if number.count(".") > 1:
                raise FormulaError(f"number '{number}' has more than one decimal point",
                                   text, i)
            if j < end and (text[j].isalpha() or text[j] == "_"):
                word = clipped(_word_at(text, i, end))
                raise FormulaError(f"unknown token '{word}': a number cannot run into letters",
                                   text, i)
            if len(number.replace(".", "").lstrip("0")) > 19:
                raise FormulaError(f"number '{number[:24]}...' is too large", text, i)
            tokens.append(_Token("num", number, i))
            i = j
        elif c.isascii() and (c.isalpha() or c == "_"):
            j = i
            while j < end and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append(_Token("name", text[i:j], i))
            i = j
        elif c in _OPERATORS:
            tokens.append(_Token("op", c, i))
            i += 1
        elif c in "()":
            tokens.append(_Token(c, c, i))
            i += 1
        else:
            raise FormulaError(f"unknown token {c!r}: expected a number, B, F, Y, X, an operator "
                               f"+ - * / % or parentheses", text, i)
    tokens.append(_Token("end", "", end))
    return tokens


def _word_at(text: str, i: int, end: int) -> str:
    j = i
    while j < end and (text[j].isalnum() or text[j] in "._"):
        j += 1
    return text[i:j]


class _Parser:
    """Precedence climbing over one entry, emitting postfix code."""

    def __init__(self, text: str, tokens: list[_Token], functions: bool, extra_names: bool,
                 params: tuple[str, ...] = ()):
        self.text = text
        self.tokens = tokens
        self.i = 0
        self.functions = functions
        self.extra_names = extra_names
        self.params = params            # the names a SimpleGPU layer's Defines take as params
        self.code: list[_Instr] = []
        self.names: list[str] = []
        self.depth = 0

    def error(self, message: str, pos: int) -> FormulaError:
        return FormulaError(message, self.text, pos)

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def parse(self) -> None:
        self.sum()
        if self.tok.kind == ")":
            raise self.error("unbalanced parentheses: ')' without a matching '('", self.tok.pos)
        if self.tok.kind != "end":
            raise self.error(f"expected an operator, found {self._describe(self.tok)}",
                             self.tok.pos)

    def sum(self) -> None:
        self.product()
        while self.tok.kind == "op" and self.tok.text in "+-":
            op = self.tok
            self.i += 1
            self.product()
            self.code.append(_Instr(op.text, None, op.pos))

    def product(self) -> None:
        self.unary()
        while self.tok.kind == "op" and self.tok.text in "*/%":
            op = self.tok
            self.i += 1
            self.unary()
            self.code.append(_Instr(op.text, None, op.pos))

    def _enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nesting deeper than {MAX_DEPTH} levels", pos)

    def unary(self) -> None:
        tok = self.tok
        if tok.kind == "op" and tok.text in "+-":
            self._enter(tok.pos)
            self.i += 1
            self.unary()
            if tok.text == "-":
                self.code.append(_Instr("neg", None, tok.pos))
            self.depth -= 1
        else:
            self.atom()

    def atom(self) -> None:
        tok = self.tok
        if tok.kind == "num":
            self.i += 1
            # leading zeros stripped: the tokenizer bounds the significant digits, and int()
            # refuses over 4300 digits in all
            value = float(tok.text) if "." in tok.text else int(tok.text.lstrip("0") or "0")
            self.code.append(_Instr("num", value, tok.pos))
        elif tok.kind == "name":
            self.i += 1
            if self.tok.kind == "(" and self.functions:
                if tok.text.lower() not in FUNCTIONS:
                    raise self.error(f"unknown function '{clipped(tok.text)}': known are "
                                     f"{', '.join(FUNCTIONS)}", tok.pos)
                self.parenthesized()
                self.code.append(_Instr("call", tok.text.lower(), tok.pos))
                return
            name = tok.text.upper() if tok.text.upper() in VARIABLES else tok.text
            if name not in VARIABLES and not self.extra_names and name not in self.params:
                also = (f", and the layer's parameters {', '.join(self.params)}"
                        if self.params else "")
                raise self.error(f"unknown token '{clipped(tok.text)}': the variables are B, F, "
                                 f"Y, X (either case){also}", tok.pos)
            if name not in self.names:
                self.names.append(name)
            self.code.append(_Instr("var", name, tok.pos))
        elif tok.kind == "(":
            self.parenthesized()
        elif tok.kind == "end":
            what = "empty formula" if not self.code and self.i == 0 else \
                f"formula ends after '{self.tokens[self.i - 1].text}'"
            raise self.error(f"{what}: expected {_EXPECTED_ATOM}", tok.pos)
        elif tok.kind == ")":
            raise self.error(f"expected {_EXPECTED_ATOM}, found ')'", tok.pos)
        else:
            raise self.error(f"expected {_EXPECTED_ATOM}, found {self._describe(tok)}", tok.pos)

    def parenthesized(self) -> None:
        open_tok = self.tok
        self._enter(open_tok.pos)
        self.i += 1
        self.sum()
        if self.tok.kind != ")":
            raise self.error("unbalanced parentheses: '(' is never closed", open_tok.pos)
        self.i += 1
        self.depth -= 1

    @staticmethod
    def _describe(tok: _Token) -> str:
        if tok.kind == "end":
            return "the end"
        return f"'{tok.text}'"


def _c_div(a, b):
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _c_mod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    return math.fmod(a, b)


def _number_text(value) -> str:
    """A value for a message: an int past MAX_MAGNITUDE by its order of magnitude (str()
    refuses an int of over 4,300 digits, and a message is one line)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_MAGNITUDE:
        sign = "-" if value < 0 else ""
        return f"about {sign}10**{int(value.bit_length() * math.log10(2))}"
    return str(value)


def _round_half_away(v) -> float:
    """C's round(): halves away from zero. `floor(v + 0.5)` is wrong for the double just below
    0.5 (0.49999999999999994 + 0.5 rounds up to 1.0); the fraction of a double is exact."""
    whole = math.floor(abs(v))
    magnitude = float(whole + (1 if abs(v) - whole >= 0.5 else 0))
    return math.copysign(magnitude, v)


# floor, ceil and round give a double, as in C: `floor(7.5)/2` is 3.5, not 3
_CALLS = {
    "floor": lambda v: float(math.floor(v)), "ceil": lambda v: float(math.ceil(v)),
    "round": _round_half_away, "abs": abs, "sqrt": math.sqrt,
}


class Formula:
    """A parsed, immutable formula. `text` is the entry as written (stripped), `variables` the
    names it uses in order of first use (B F Y X upper-cased)."""

    __slots__ = ("text", "variables", "_code")

    def __init__(self, text: str, variables: tuple[str, ...], code: tuple[_Instr, ...]):
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "_code", code)

    def __setattr__(self, name, value):
        raise AttributeError("Formula is immutable")

    def __repr__(self) -> str:
        return f"Formula({self.text!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Formula) and other.text == self.text and other._code == self._code

    def __hash__(self) -> int:
        return hash(self.text)

    def zero_divisor(self) -> int | None:
        """The position (in `text`) of a / or % whose divisor is the number 0 as written
        (`Y/0`), which no input can make valid; None when there is none (a divisor that only
        computes to 0, `Y/(X-X)`, is found where it is evaluated)."""
        for before, ins in zip(self._code, self._code[1:]):
            if ins.op in ("/", "%") and before.op == "num" and before.arg == 0:
                return ins.pos
        return None

    def value(self, env: Mapping[str, int | float]) -> int | float:
        """The raw value: an int for integer formulas, a float where the VPU dialect used one."""
        stack: list = []
        for ins in self._code:
            if ins.op == "num":
                stack.append(ins.arg)
            elif ins.op == "var":
                stack.append(self._lookup(env, ins))
            elif ins.op == "neg":
                stack.append(-stack.pop())
            elif ins.op == "call":
                stack.append(self._call(ins, stack.pop(), env))
            else:
                b = stack.pop()
                a = stack.pop()
                stack.append(self._binary(ins, a, b, env))
        return stack[0]

    def evaluate(self, env: Mapping[str, int | float], *, positive: bool = False) -> int:
        """The value as an int (a float result is truncated toward zero, as a C cast does).
        With `positive=True`, anything below 1 is a FormulaError (a work size must be >= 1)."""
        raw = self.value(env)
        if isinstance(raw, float):
            if not math.isfinite(raw):
                raise FormulaError(f"the result is {raw} {self._values(env)}", self.text)
            raw = int(raw)
        if positive and raw < 1:
            raise FormulaError(f"the result is {raw} {self._values(env)}; expected a positive "
                               f"integer", self.text)
        return raw

    # -- evaluation helpers ----------------------------------------------------------------
    def _lookup(self, env, ins: _Instr):
        name = ins.arg
        if name in env:
            value = env[name]
        elif isinstance(name, str) and name.lower() in env:
            value = env[name.lower()]
        else:
            raise FormulaError(f"'{name}' has no value here (known: "
                               f"{', '.join(sorted(map(str, env))) or 'none'})", self.text, ins.pos)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FormulaError(f"'{name}' is {value!r}, not a number", self.text, ins.pos)
        # a value from outside (an attribute: stride="1e999") is held to the bounds every
        # intermediate value is: finite, within MAX_MAGNITUDE (math.fmod(inf, 2) raises
        # ValueError, and a 5000-digit int makes each operation slow)
        if isinstance(value, float) and not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise FormulaError(f"'{name}' is {_number_text(value)}; a value in a formula is "
                               f"finite and at most {MAX_MAGNITUDE} in magnitude", self.text,
                               ins.pos)
        return value

    def _values(self, env) -> str:
        used = [f"{n}={_number_text(env[n])}" for n in self.variables if n in env]
        return f"with {', '.join(used)}" if used else "(no variables)"

    def _check(self, ins: _Instr, result, env):
        if isinstance(result, float):
            if not math.isfinite(result):
                raise FormulaError(f"the value is {result} {self._values(env)}", self.text, ins.pos)
        elif abs(result) > MAX_MAGNITUDE:
            raise FormulaError(f"the value grows beyond {MAX_MAGNITUDE} {self._values(env)}",
                               self.text, ins.pos)
        return result

    def _binary(self, ins: _Instr, a, b, env):
        op = ins.op
        if op in "/%" and b == 0:
            what = "division" if op == "/" else "modulo"
            raise FormulaError(f"{what} by zero {self._values(env)}", self.text, ins.pos)
        try:
            if op == "+":
                result = a + b
            elif op == "-":
                result = a - b
            elif op == "*":
                result = a * b
            elif op == "/":
                result = _c_div(a, b)
            else:
                result = _c_mod(a, b)
        except (OverflowError, ValueError):     # math.fmod of an infinity, should one come
            raise FormulaError(f"the value overflows {self._values(env)}", self.text,
                               ins.pos) from None
        return self._check(ins, result, env)

    def _call(self, ins: _Instr, v, env):
        if ins.arg == "sqrt" and v < 0:
            raise FormulaError(f"sqrt of a negative value ({v}) {self._values(env)}",
                               self.text, ins.pos)
        try:
            result = _CALLS[ins.arg](v)
        except (OverflowError, ValueError):
            raise FormulaError(f"{ins.arg}({v}) has no finite value", self.text, ins.pos) from None
        return self._check(ins, result, env)


def _parse_span(text: str, start: int, end: int, functions: bool, extra_names: bool,
                params: tuple[str, ...] = ()) -> Formula:
    tokens = _tokenize(text, start, end, functions)
    parser = _Parser(text, tokens, functions, extra_names, params)
    parser.parse()
    segment = text[start:end]
    lead = start + len(segment) - len(segment.lstrip())
    # evaluation errors carry the entry's own text, so positions become relative to it
    code = tuple(_Instr(i.op, i.arg, i.pos - lead) for i in parser.code)
    return Formula(segment.strip(), tuple(parser.names), code)


def parse_formula(text: str, *, functions: bool = False, extra_names: bool = False) -> Formula:
    """One formula -> Formula; FormulaError (with the column) when it does not parse."""
    if not isinstance(text, str):
        raise FormulaError(f"a formula must be text, found {type(text).__name__}", str(text))
    if "," in text:
        raise FormulaError("one formula expected, found a ',' (a list)", text, text.index(","))
    return _parse_span(text, 0, len(text), functions, extra_names)


def parse_formula_list(text: str, *, max_entries: int | None = 3, functions: bool = False,
                       extra_names: bool = False,
                       params: tuple[str, ...] = ()) -> tuple[Formula, ...]:
    """'X, Y, B*F' -> three Formulas. Every entry must be non-empty; positions in errors are
    columns of the whole text. `params`: names allowed besides B, F, Y, X (a SimpleGPU layer's
    parameters); `extra_names`: any name (the VPU dialect)."""
    if not isinstance(text, str):
        raise FormulaError(f"a formula list must be text, found {type(text).__name__}", str(text))
    spans = []
    start = 0
    for i, c in enumerate(text):
        if c == ",":
            spans.append((start, i))
            start = i + 1
    spans.append((start, len(text)))
    if max_entries is not None and len(spans) > max_entries:
        comma = [i for i, c in enumerate(text) if c == ","][max_entries - 1] if max_entries else 0
        raise FormulaError(f"{len(spans)} entries, at most {max_entries} allowed", text, comma)
    formulas = []
    for n, (a, b) in enumerate(spans):
        if not text[a:b].strip():
            where = "the list is empty" if len(spans) == 1 else f"entry {n + 1} is empty"
            raise FormulaError(f"{where}: expected a formula", text, a)
        formulas.append(_parse_span(text, a, b, functions, extra_names, params))
    return tuple(formulas)


def evaluate_work_sizes(formulas, env: Mapping[str, int | float]) -> tuple[int, ...]:
    """Evaluate each formula and require a positive integer (a work size) within the limits
    of `check_work_size_limits`."""
    sizes = tuple(f.evaluate(env, positive=True) for f in formulas)
    check_work_size_limits(sizes, formulas, env)
    return sizes


def check_work_size_limits(sizes, formulas, env: Mapping[str, int | float] | None = None, *,
                           product: bool = True) -> None:
    """FormulaError when an entry is over MAX_WORK_SIZE or (with `product`) all entries
    multiplied are over MAX_WORK_ITEMS. `formulas` are Formula objects or texts, one per size."""
    texts = [f.text if isinstance(f, Formula) else str(f) for f in formulas]
    for size, formula, text in zip(sizes, formulas, texts):
        if size > MAX_WORK_SIZE:
            values = formula._values(env or {}) \
                if isinstance(formula, Formula) and formula.variables else ""
            raise FormulaError(f"the result is {size}{' ' + values if values else ''}; a work "
                               f"size is at most {MAX_WORK_SIZE} (2**32-1)", text)
    total = 1
    for size in sizes:
        total *= size
    if product and total > MAX_WORK_ITEMS:
        raise FormulaError(f"the sizes {', '.join(map(str, sizes))} make {total} work items; "
                           f"at most {MAX_WORK_ITEMS} (2**40) are allowed", ",".join(texts))
