"""Fuzz inputs shared by the property tests (tests/unit/test_fuzz_*.py, through hypothesis) and the
campaign runner (scripts/fuzz_configs.py, through a seeded random.Random): mutated descriptors
and random work-size formulas, each with the check that it must pass.

Every generator takes a `random.Random`-like object and uses only random(), randint(), choice()
and shuffle(), so hypothesis's `st.randoms()` drives (and shrinks) the same code the campaign
runs. The checks raise AssertionError (or let another exception through) when the property does
not hold; a project error (CustomLayersError) is an answer, not a failure.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_GLOBS = ("examples/layers/*/*.xml", "tests/data/configs/**/*.xml")

# a seed with everything the loader knows, so mutations reach every check
RICH_SEED = """<?xml version="1.0" encoding="UTF-8"?>
<!-- two layers, no root, as OpenVINO writes them -->
<CustomLayer name="Rich" type="SimpleGPU" version="1">
  <Kernel entry="rich">
    <Source filename="rich.cl"/>
    <Define name="ALPHA" type="float" param="alpha" default="0.5f"/>
    <Define name="TAPS" type="int[]" param="taps" default="1,2,3"/>
    <Define name="NUM 3"/>
    <Define name="SCALES" type="float[]" default="1.0,2.0f,-0.5"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="byxf"/>
    <Data name="weights" arg-index="1"/>
    <Tensor arg-index="2" type="input" port-index="1" format="ANY"/>
    <Tensor arg-index="3" type="output" port-index="0" shape="B,F*2,Y/2,X/2"/>
  </Buffers>
  <CompilerOptions options="-cl-mad-enable"/>
  <CompilerOptions options="-cl-fast-relaxed-math"/>
  <WorkSizes global="(X+7)/8*8,Y,B*F" local="8,1,1" dim="input,0"/>
</CustomLayer>
<CustomLayer name="Second" type="SimpleGPU" version="1">
  <Kernel entry="second"><Source filename="second.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
  <WorkSizes global="B*F*Y*X"/>
</CustomLayer>
"""
RICH_SOURCES = {
    "rich.cl": "__kernel void rich(const __global float* a, const __global float* w,\n"
               "                   const __global float* b, __global float* o) { }\n",
    "second.cl": "#define KERNEL(name) __kernel void name\nKERNEL(second)(__global float* a,"
                 " __global float* o) { }\n",
}


@dataclass(frozen=True)
class Seed:
    name: str
    text: str
    sources: dict = field(default_factory=dict)


@lru_cache(maxsize=1)
def seeds() -> tuple[Seed, ...]:
    """The example configs and the test configs, each with the sources it names (read from
    beside it, where they exist), plus RICH_SEED."""
    found = [Seed("rich.xml", RICH_SEED, dict(RICH_SOURCES))]
    for pattern in SEED_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            sources = {}
            for name in re.findall(r'filename="([^"]*)"', text):
                source = path.parent / name
                if source.is_file():
                    sources[name] = source.read_text(encoding="utf-8")
            found.append(Seed(str(path.relative_to(ROOT)), text, sources))
    return tuple(found)


# -- descriptor mutations ----------------------------------------------------------------------
ATTRIBUTE_NAMES = ("name", "type", "version", "entry", "filename", "param", "default",
                   "arg-index", "port-index", "format", "shape", "options", "global", "local",
                   "dim", "stage", "arg-name", "source")
ELEMENT_NAMES = ("CustomLayer", "Kernel", "Source", "Define", "Buffers", "Tensor", "Data",
                 "CompilerOptions", "WorkSizes", "Parameters", "Scalar", "Where", "Colour",
                 "customlayer", "x:Tensor")
INTERESTING_VALUES = (
    "", " ", "0", "1", "-1", "+1", "007", "1.5", "1e309", "0x10", "10u", "1.0f", "nan", "true",
    "2147483648", "99999999999", "10000000", "1023", "1024", "9" * 40, "9" * 5000, "0" * 5000 + "1",
    "flaot", "float", "int", "int[]", "float[]", "Float", "int []", "double",
    "input", "output", "inptu", "BFYX", "bfyx", "Bfyx", "ANY", "input,1", "input 2", "input,",
    "output,1", "input," + "9" * 30, "SimpleGPU", "MVCL", "2",
    "X", "B*F*Y*X", "X,Y,B*F", "X%0", "X/(Y-Y)", "(((X", "X)", "X,", ",", "X,Y,B,F", "1,1,1,1",
    "X*X*X*X*X", "4294967296", "X+" * 600 + "X", "-X", "0", "X Y", "x\ty", "floor(X)",
    "B,F,Y,X,1", "1.0,2.0,,3", "1,\n2", "a\\", "&#10;#error", "&lt;&amp;&gt;", "&#x1F600;",
    "&#0;", "&#xD800;", "é", "\u202e", "k", "rich", "weights", "../../etc/passwd", "/abs.cl",
    "rich.cl", "second.cl", "missing.cl", "-cl-mad-enable", "-Dx=1 -I/tmp",
)
FRAGMENTS = (
    "<!--", "-->", "<!-- <!DOCTYPE x [ -->", "<!-- ]> -->", "<![CDATA[ <!DOCTYPE y [ ]]>",
    "<![CDATA[", "]]>", "<?pi <!DOCTYPE z [ ?>", "<?xml version='1.0'?>", "<!DOCTYPE x>",
    '<!DOCTYPE x [ <!ENTITY e "boom"> ]>', "<!DOCTYPE x [", "]>", "&e;", "&amp;", "&#0;",
    "&#x10FFFF;", '<Define name="A" type="int" default="1"/>',
    '<Define name="B" type="flaot" param="b"/>',
    '<Tensor arg-index="9" type="output" port-index="1"/>',
    '<Tensor arg-index="99999999999" type="input" port-index="0"/>',
    '<Data name="w" arg-index="2"/>', '<WorkSizes global="X" local="3"/>',
    '<WorkSizes dim="input,5" global="X%0"/>', '<Source filename="rich.cl"/>',
    '<CustomLayer name="Rich" type="SimpleGPU" version="1"/>', "<Buffers/>", "</Kernel>",
    "<Kernel>", "<", ">", "/>", '"', "'", "=", "\x00", "\x0b", "\ufeff", "\ud800", "é",
    "<a>" * 300 + "</a>" * 300, "<X/>" * 50,
)
_ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')
_TAG = re.compile(r"</?([\w:.-]+)")
_ELEMENT = re.compile(r"<([\w:.-]+)[^<>]*/>|<([\w:.-]+)[^<>]*>.*?</\2>", re.S)


def _pick(rng, pattern: re.Pattern, text: str):
    matches = list(pattern.finditer(text))
    return rng.choice(matches) if matches else None


def _value(rng) -> str:
    if rng.random() < 0.75:
        return rng.choice(INTERESTING_VALUES)
    return _junk(rng, rng.randint(0, 12))


def _junk(rng, n: int) -> str:
    alphabet = 'aZ09 _-.,:;()[]{}<>/=&#"\'\\*+%!?\t\n\r\x00\x7fé\u202e\U0001F600'
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mutate_once(rng, text: str) -> str:
    kind = rng.randint(0, 9)
    if kind == 0:  # an attribute's value
        m = _pick(rng, _ATTRIBUTE, text)
        if m:
            return text[:m.start(2)] + _value(rng) + text[m.end(2):]
    elif kind == 1:  # an attribute's name
        m = _pick(rng, _ATTRIBUTE, text)
        if m:
            name = rng.choice(ATTRIBUTE_NAMES) if rng.random() < 0.8 else _junk(rng, 4)
            return text[:m.start(1)] + name + text[m.end(1):]
    elif kind == 2:  # an element's name (one tag: often unbalanced, on purpose)
        m = _pick(rng, _TAG, text)
        if m:
            name = rng.choice(ELEMENT_NAMES) if rng.random() < 0.8 else _junk(rng, 3)
            return text[:m.start(1)] + name + text[m.end(1):]
    elif kind == 3:  # insert a fragment
        pos = rng.randint(0, len(text))
        return text[:pos] + rng.choice(FRAGMENTS) + text[pos:]
    elif kind == 4:  # delete an element
        m = _pick(rng, _ELEMENT, text)
        if m:
            return text[:m.start()] + text[m.end():]
    elif kind == 5:  # duplicate an element
        m = _pick(rng, _ELEMENT, text)
        if m:
            return text[:m.end()] + m.group(0) + text[m.end():]
    elif kind == 6:  # delete a span
        a = rng.randint(0, len(text))
        return text[:a] + text[a + rng.randint(1, 40):]
    elif kind == 7:  # swap two lines
        lines = text.split("\n")
        i, j = rng.randint(0, len(lines) - 1), rng.randint(0, len(lines) - 1)
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    elif kind == 8:  # an attribute added to an element
        m = _pick(rng, _TAG, text)
        if m and not text.startswith("</", m.start()):
            attr = f' {rng.choice(ATTRIBUTE_NAMES)}="{_value(rng)}"'
            return text[:m.end()] + attr + text[m.end():]
    else:  # random characters
        pos = rng.randint(0, len(text))
        return text[:pos] + _junk(rng, rng.randint(1, 8)) + text[pos:]
    return text


def _as_bytes(rng, text: str) -> bytes:
    """Text -> bytes, sometimes in another encoding, with a BOM, or with bytes flipped."""
    choice = rng.randint(0, 5)
    if choice == 0:
        data = text.encode("utf-16", "surrogatepass")
    elif choice == 1:
        data = b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    elif choice == 2:
        data = text.encode("latin-1", "replace")
    else:
        data = text.encode("utf-8", "surrogatepass")
    data = bytearray(data)
    for _ in range(rng.randint(0, 3) if data else 0):
        data[rng.randint(0, len(data) - 1)] = rng.randint(0, 255)
    if rng.random() < 0.1:
        data = data[:rng.randint(0, len(data))]
    return bytes(data)


@dataclass
class ConfigInput:
    data: str | bytes
    sources: dict
    seed: str
    name: str = "fuzz.xml"
    as_file: bool = False   # loaded with load_configs from a temporary folder


def mutated_config(rng) -> ConfigInput:
    """A seed config with 1 to 4 mutations, as text or (one time in four) as bytes; its sources
    mutated too, now and then."""
    seed = rng.choice(seeds())
    text = seed.text
    for _ in range(rng.randint(1, 4)):
        text = _mutate_once(rng, text)
    sources = dict(seed.sources)
    if sources and rng.random() < 0.15:
        key = rng.choice(sorted(sources))
        sources[key] = rng.choice(("", "/*" * 50, "kernel " * 50, sources[key][::-1],
                                   sources[key].encode("utf-16"), b"\xff\xfe\x00"))
    data = _as_bytes(rng, text) if rng.random() < 0.25 else text
    return ConfigInput(data, sources, seed.name, as_file=rng.random() < 0.1)


def _load(item: ConfigInput):
    from customlayers.config import load_config_string, load_configs
    if not item.as_file:
        return load_config_string(item.data, item.sources, name=item.name), item.name
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        for name, text in item.sources.items():
            if re.fullmatch(r"[\w.-]+", name) and not name.startswith("."):  # the seed's own
                (base / name).write_bytes(text if isinstance(text, bytes) else
                                          text.encode("utf-8", "surrogatepass"))
        path = base / item.name
        path.write_bytes(item.data if isinstance(item.data, bytes) else
                         item.data.encode("utf-8", "surrogatepass"))
        return load_configs([path]), str(path)


def check_config(item: ConfigInput):
    """Load the config; every diagnostic must be complete (file, line, column, known code) and
    render on one line; `raise_if_errors` raises ConfigError or nothing. Returns the ConfigSet."""
    from customlayers.config.codes import CODES
    from customlayers.config.simplegpu.params import unused_params
    configs, file = _load(item)
    for d in configs.diagnostics:
        assert d.file == file, d
        assert d.line >= 1 and d.column >= 1, f"no place: {d.render()[:200]}"
        assert d.code in CODES and d.severity in ("error", "warning", "info"), d
        assert len(d.message) < 2000, f"message of {len(d.message)} characters: {d.render()[:300]}"
        assert "\n" not in d.render(), d.render()[:200]
    for spec in configs.layers.values():  # what a valid layer promises its users
        if spec.kind == "MVCL":
            check_mvcl_layer(spec)
            continue
        if spec.kind != "SimpleGPU":
            continue
        args = sorted([t.arg_index for t in spec.tensors] + [b.arg_index for b in spec.data])
        assert args == list(range(spec.num_args)), f"{spec.name}: arg-index {args}"
        for kind in (spec.inputs, spec.outputs):
            assert [t.port_index for t in kind] == list(range(len(kind))), spec.name
        unused_params(spec, {"alpha": "1", "bta": "2"})
    configs.raise_if_errors()
    return configs


def check_mvcl_layer(layer) -> None:
    """A valid MVCL layer binds every kernel parameter of every stage, and generates each
    variant's programs for a default shape (with the attributes `validate --compile` makes up)
    or says why with a project error: what jit, run-layer and validate --compile do with it
    (a <Scalar> misspelt <Scala1r> once left a parameter unbound: AttributeError there)."""
    from customlayers.cli.layer_commands.mvcl_validate import input_ports, variant_attributes
    from customlayers.jit.mvcl_program import generate_mvcl_stages
    from customlayers.errors import CustomLayersError
    for variant in layer.variants:
        for spec in variant.stages:
            unbound = [k.declaration for k, p in spec.arguments if p is None]
            assert not unbound, f"{layer.name} stage {spec.stage}: unbound {unbound}"
        outputs = 1 + max((t.port_index for s in variant.stages for t in s.tensors("output")),
                          default=0)
        try:
            generate_mvcl_stages(variant.stages, variant_attributes(variant, {}),
                                 [(1, 3, 8, 8)] * input_ports(layer), [(1, 3, 8, 8)] * outputs)
        except CustomLayersError:
            pass


# -- formulas ----------------------------------------------------------------------------------
VARIABLES = ("B", "F", "Y", "X", "b", "f", "y", "x")
NAMES = ("ratio", "stride", "k", "Kernel_3")
FUNCTIONS = ("floor", "ceil", "round", "abs", "sqrt")
MAX_MAGNITUDE = 2 ** 63
OUT_OF_BOUNDS = (math.inf, -math.inf, math.nan, 1e300, 10 ** 30, -(10 ** 5000))


@dataclass
class FormulaInput:
    text: str
    functions: bool
    env: dict
    tree: tuple | None    # None: junk text, no reference value


def _number(rng, functions: bool) -> tuple:
    r = rng.random()
    if functions and r < 0.25:
        whole, frac = rng.randint(0, 999), rng.randint(0, 999)
        text = rng.choice((f"{whole}.{frac}", f"{whole}.", f".{frac}"))
        return ("num", float(text), text)
    if r < 0.6:
        value = rng.randint(0, 9)
    elif r < 0.85:
        value = rng.randint(0, 10 ** rng.randint(1, 6))
    else:
        value = rng.randint(0, 10 ** rng.randint(7, 20))  # past 19 digits: refused
    text = "0" * (rng.randint(1, 30) if rng.random() < 0.05 else 0) + str(value)
    return ("num", value, text)


def _tree(rng, depth: int, functions: bool) -> tuple:
    r = rng.random()
    if depth <= 0 or r < 0.3:
        if rng.random() < 0.5:
            return _number(rng, functions)
        names = VARIABLES + (NAMES if functions else ())
        return ("var", rng.choice(names))
    if r < 0.4:
        return ("neg" if rng.random() < 0.7 else "pos", _tree(rng, depth - 1, functions))
    if r < 0.5:
        return ("paren", _tree(rng, depth - 1, functions))
    if functions and r < 0.6:
        return ("call", rng.choice(FUNCTIONS), _tree(rng, depth - 1, functions))
    return ("bin", rng.choice("+-*/%"), _tree(rng, depth - 1, functions),
            _tree(rng, depth - 1, functions))


def _space(rng) -> str:
    return rng.choice(("", "", "", " ", "  ", "\t"))


def render(tree: tuple, rng) -> str:
    kind = tree[0]
    if kind == "num":
        return tree[2]
    if kind == "var":
        return tree[1]
    if kind in ("neg", "pos"):
        return ("-" if kind == "neg" else "+") + _space(rng) + _wrap(tree[1], rng, unary=True)
    if kind == "paren":
        return "(" + _space(rng) + render(tree[1], rng) + _space(rng) + ")"
    if kind == "call":
        return tree[1] + "(" + render(tree[2], rng) + ")"
    op, a, b = tree[1], tree[2], tree[3]
    return (_wrap(a, rng, left=True, op=op) + _space(rng) + op + _space(rng)
            + _wrap(b, rng, left=False, op=op))


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


def _wrap(tree: tuple, rng, unary: bool = False, left: bool = True, op: str = "+") -> str:
    """Parenthesize a child when the grammar needs it for the tree to mean what it says."""
    text = render(tree, rng)
    if tree[0] == "bin":
        inner = _PRECEDENCE[tree[1]]
        outer = 3 if unary else _PRECEDENCE[op]
        if inner < outer or (inner == outer and not left):
            return "(" + text + ")"
    return text


class Refused(Exception):
    """The reference says: this formula has no value (the implementation must say FormulaError)."""


def _c_div(a: int, b: int) -> int:
    q = a // b
    if q < 0 and q * b != a:   # C truncates toward zero; floor division went one below
        q += 1
    return q


def reference(tree: tuple, env: dict):
    """The value of `tree` in C semantics: integers with truncating division and a remainder
    that takes the dividend's sign; a float operand makes the operation float (as C promotes);
    floor, ceil and round give a double as in C, round halves away from zero. Limits as the
    language documents them: a value beyond 2**63 or not finite, a division or modulo by zero,
    a negative sqrt: Refused."""
    kind = tree[0]
    if kind == "num":
        if isinstance(tree[1], int) and len(str(tree[1])) > 19:
            raise Refused("number too long")
        return tree[1]
    if kind == "var":
        name = tree[1].upper() if tree[1].upper() in ("B", "F", "Y", "X") else tree[1]
        value = env[name]
        if isinstance(value, float) and not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise Refused("a value from outside the formula beyond the limits")
        return value
    if kind == "neg":
        return -reference(tree[1], env)
    if kind in ("pos", "paren"):
        return reference(tree[1], env)
    if kind == "call":
        v = reference(tree[2], env)
        fn = tree[1]
        if fn == "sqrt":
            if v < 0:
                raise Refused("sqrt of a negative value")
            result = math.sqrt(v)
        elif fn == "abs":
            result = -v if v < 0 else v
        else:
            whole = float(math.floor(abs(v)))
            frac = abs(v) - whole           # exact for doubles
            if fn == "round":
                magnitude = whole + (1.0 if frac >= 0.5 else 0.0)
            elif (fn == "floor") == (v >= 0):
                magnitude = whole
            else:
                magnitude = whole + (1.0 if frac else 0.0)
            result = magnitude if v >= 0 else -magnitude
        return _limit(result)
    op, a, b = tree[1], reference(tree[2], env), reference(tree[3], env)
    if op in "/%" and b == 0:
        raise Refused("division by zero")
    floats = isinstance(a, float) or isinstance(b, float)
    if floats:
        try:
            a, b = float(a), float(b)
        except OverflowError:
            raise Refused("too large for a float") from None
        result = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                  "/": lambda: a / b, "%": lambda: math.fmod(a, b)}[op]()
    else:
        result = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                  "/": lambda: _c_div(a, b), "%": lambda: a - b * _c_div(a, b)}[op]()
    return _limit(result)


def _limit(result):
    if isinstance(result, float) and not math.isfinite(result):
        raise Refused("not finite")
    if isinstance(result, int) and abs(result) > MAX_MAGNITUDE:
        raise Refused("too large")
    return result


def random_formula(rng) -> FormulaInput:
    """A formula over the grammar (its tree kept for the reference), one time in four broken
    with junk; the VPU dialect (functions, fractions, names) one time in three."""
    functions = rng.random() < 0.33
    tree = _tree(rng, rng.randint(0, 6), functions)
    text = _space(rng) + render(tree, rng) + _space(rng)
    env = {v: rng.choice((1, 2, 3, 7, 224, rng.randint(0, 10 ** 6))) for v in "BFYX"}
    if functions:   # attributes: now and then one beyond the limits (stride="1e999")
        env.update({n: rng.choice((0, 1, 0.5, 2.5, -3, 10 ** 6)) if rng.random() < 0.97 else
                    rng.choice(OUT_OF_BOUNDS) for n in NAMES})
    if rng.random() < 0.25:
        for _ in range(rng.randint(1, 3)):
            pos = rng.randint(0, len(text))
            cut = rng.randint(0, 3)
            text = text[:pos] + _junk(rng, rng.randint(0, 3)) + text[pos + cut:]
        return FormulaInput(text, functions, env, None)
    return FormulaInput(text, functions, env, tree)


def check_formula(item: FormulaInput):
    """Parse and evaluate. A formula with a tree must give the reference's value, or
    FormulaError where the reference refuses; junk may give either. Returns the value."""
    from customlayers.config.formulas import parse_formula, parse_formula_list
    from customlayers.errors import FormulaError
    kw = dict(functions=item.functions, extra_names=item.functions)
    if item.tree is None:
        formulas = parse_formula_list(item.text, max_entries=None, **kw)
        return [f.evaluate(item.env) for f in formulas]
    try:
        expected = reference(item.tree, item.env)
    except Refused:
        expected = Refused
    try:
        got = parse_formula(item.text, **kw).value(item.env)
    except FormulaError:
        if expected is Refused:
            raise
        raise AssertionError(f"{item.text!r} with {item.env}: FormulaError, but the C "
                             f"reference gives {expected!r}") from None
    assert expected is not Refused, f"{item.text!r} with {item.env}: {got!r}, reference refuses"
    assert type(got) is type(expected) and got == expected, \
        f"{item.text!r} with {item.env}: {got!r}, the C reference gives {expected!r}"
    return got
