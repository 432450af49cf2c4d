"""Shape arithmetic in the ONNX reader: folded at load when its inputs are constants, else
kept as a fold-only node (graph/fold_eval.py: FOLD_TYPE) for the shape-folding pass, which
evaluates it once the request's input shapes are known (passes/shape_folding.py).

A value is *pending* when a fold-only node computes it: known at compile time, not at load.
A graph input that a translation needs as a constant (Reduce axes, Slice starts, Pad pads the
caller feeds) is known at compile time too: a fold-only node may read it by value, and the
Network compiles it in per value given (a value input: runtime/compile/network.py).
Shape arithmetic reads constants and pending values only; an input computed at run time by a
layer (a truly dynamic value) is refused here, naming the node, the op and the input. The ops
whose data is a tensor and whose shape-like operand is computed (Reshape, Expand, Tile, Slice,
Split, Unsqueeze) keep their IR op and read the pending operand, a Const once folded.

Like translate.py, an op module imports this one; it imports none of them.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes
from ..fold_eval import FOLD_TYPE, SHAPE_READERS, evaluate, shape_text
from .shapes import infer_shapes, skeleton


def is_pending(r, name: str | None) -> bool:
    return bool(name) and r.alias.get(name, name) in r.pending


def is_known(r, name: str | None) -> bool:
    """A constant, or a value the pass folds (absent optional inputs count as known)."""
    return not name or r.folded(name) is not None or is_pending(r, name)


# the most elements an operand fed as a graph input may have to be compiled in by value (a
# shape, axes, pads; runtime/compile/plan_keys.py's MAX_VALUE_INPUT_ELEMENTS checks the value
# given)
SHAPE_VECTOR_ELEMENTS = 64


def is_fed_operand(r, name: str | None) -> bool:
    """A graph input that can be compiled in by value: a scalar or a vector of a few elements
    (axes, pads, a ratio). A larger one, or one of higher rank, is data: never folded."""
    if not name or not r.is_graph_input(name):
        return False
    shape = r.info.get(r.alias.get(name, name), (None, ""))[0]
    return shape is not None and len(shape) <= 1 and \
        all(d is None or d <= SHAPE_VECTOR_ELEMENTS for d in shape)


def is_late(r, name: str | None) -> bool:
    """Known at compile time, not at load: pending, or a graph input read by value."""
    return bool(name) and (is_pending(r, name) or is_fed_operand(r, name))


def is_compile_time(r, name: str | None) -> bool:
    """A constant, pending, or a graph input read by value: a plan can be compiled for it."""
    return is_known(r, name) or is_fed_operand(r, name)


def need_compile_time(r, node, k: int, what: str) -> str:
    """Input k of the node, which the op needs before the network runs: refused when a layer
    computes it at run time (or it is a graph input too large to be compiled in)."""
    value = node.input[k]
    if not is_compile_time(r, value):
        why = (f"a graph input of {r.describe_shape(value)}, too large to be compiled in"
               if r.is_graph_input(value) else "computed at run time by a layer")
        r.refuse(f"the {what} (input {k}, '{value}') must be a constant, shape arithmetic or a "
                 f"graph input of at most {SHAPE_VECTOR_ELEMENTS} elements (compiled in per "
                 f"value given); this one is {why}")
    return value


def _integer(r, name: str) -> bool:
    value = r.folded(name)
    return value is not None and value.dtype.kind in "iub"


def _fed_shape_vector(r, name: str) -> bool:
    """An integer graph input read by value (a target shape, pads the caller feeds)."""
    return is_fed_operand(r, name) and \
        r.info.get(r.alias.get(name, name), (None, ""))[1][:1] in ("i", "u")


def is_shape_arithmetic(r, inputs: list) -> bool:
    """Whether an op with these inputs is shape arithmetic: every input known, and one pending
    or every constant an integer (float constants keep today's layers). A small integer vector
    the caller feeds counts as known beside a pending value or an integer constant
    (Max(Shape(x), target) in CenterCropPad): it is compiled in per value given (a value
    input)."""
    names = [i for i in inputs if i]
    known = [i for i in names if is_known(r, i)]
    if not known or not all(i in known or _fed_shape_vector(r, i) for i in names):
        return False
    return any(is_pending(r, i) for i in names) or all(_integer(r, i) for i in known)


def fold_or_defer(r, op: str, inputs: list, outputs: list, name: str,
                  attrs: dict | None = None, fed: bool = False) -> None:
    """Evaluate ONNX op `op` now when every input is a constant, else emit a fold-only node
    whose outputs are pending. `inputs` may hold None (an absent optional input); for the
    SHAPE_READERS input 0 is read for its shape only. `fed`: an input may be a graph input
    read by value (is_fed_operand), where the caller knows it is an operand (axes, pads), not
    data."""
    attrs = {k: str(v) for k, v in (attrs or {}).items()}
    reads_shape = op in SHAPE_READERS
    for k, value in enumerate(inputs):
        if value and not (reads_shape and k == 0) and not (
                is_known(r, value) or fed and is_fed_operand(r, value)):
            # worded as the refusal of an op without a translation: on data, it has none
            r.refuse(f"the ONNX op {op} has no translation to IR ops for values computed at "
                     f"run time: it runs here only as shape arithmetic, folded before the "
                     f"network runs, and its input {k} ('{value}') is computed at run time "
                     f"by a layer")
    values = [None if not v else r.folded(v) for v in inputs]
    if not reads_shape and all(v is not None for v, n in zip(values, inputs) if n):
        try:
            results = evaluate(op, attrs, values)
        except (ValueError, TypeError, IndexError) as e:     # what the values do not fit
            r.refuse(str(e))
        for out, value in zip(outputs, results):
            if out:
                r.consts[out] = value
        return
    present = [k for k, v in enumerate(inputs) if v]
    attrs.update(op=op, present=",".join(map(str, present)))
    if reads_shape:                         # the dims the pass binds to the request's shapes
        dims = r.symbolic_dims(inputs[0])
        if dims is None:
            r.refuse(f"{op} of '{inputs[0]}' needs its rank, which shape inference did not "
                     f"give{r.unknown_note()}")
        attrs["dims"] = shape_text(dims)
    named = [o if o else f"{name}/unused{k}" for k, o in enumerate(outputs)]
    r.emit(FOLD_TYPE, [inputs[k] for k in present], named, name, attrs=attrs)
    r.pending.update(named)


def try_shape_arithmetic(r, node, name: str, attrs: dict | None = None,
                         inputs: list | None = None) -> bool:
    """For an op that is a layer on tensors and shape arithmetic on shapes: fold or defer it
    (True) when its inputs make it shape arithmetic, else leave it to the translation."""
    inputs = list(node.input) if inputs is None else inputs
    if not is_shape_arithmetic(r, inputs):
        return False
    fold_or_defer(r, node.op_type, inputs, list(node.output), name, attrs, fed=True)
    return True


# float ops whose IEEE result is correctly rounded (numpy's and every OpenCL device's agree to the
# bit): a small constant subgraph of them (a scale of 1/sqrt(sqrt(head size)) an exporter
# writes as layers) is folded at load instead of costing a launch per use
_EXACT_FLOAT_OPS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                    "Sqrt": np.sqrt, "Neg": np.negative, "Abs": np.abs,
                    "Reciprocal": lambda v: np.divide(np.ones_like(v), v)}
_BINARY = ("Add", "Sub", "Mul", "Div")
MAX_FOLDED_FLOATS = 4096


def try_fold_float_constants(r, node) -> bool:
    """Fold the node at load (True) when it is one of _EXACT_FLOAT_OPS on float constants of
    one type, at most MAX_FOLDED_FLOATS values in and out; else leave it to the translation."""
    fn = _EXACT_FLOAT_OPS.get(node.op_type)
    names = [i for i in node.input if i]
    if fn is None or len(names) != (2 if node.op_type in _BINARY else 1):
        return False          # (a legacy variadic Sum-like use: the translation's)
    values = [r.folded(i) for i in names]
    if any(v is None or v.dtype != values[0].dtype or v.size > MAX_FOLDED_FLOATS
           for v in values) or values[0].dtype not in (np.float32, np.float64):
        return False
    try:
        shape = np.broadcast_shapes(*(v.shape for v in values))
    except ValueError:
        return False                          # the translation refuses it with its place
    if int(np.prod(shape, dtype=np.int64)) > MAX_FOLDED_FLOATS:
        return False
    with np.errstate(all="ignore"):          # an inf or NaN is the value the op gives
        r.consts[node.output[0]] = np.asarray(fn(*values), values[0].dtype)
    return True


def cast_attrs(to: int) -> dict:
    """Cast's target as fold_eval reads it (to: a numpy dtype name; boolean: held as u8)."""
    boolean = to == dtypes.BOOL_ONNX
    held = dtypes.numpy_of(dtypes.ONNX_TYPES[to])
    return {"to": np.dtype(held).name, "boolean": int(boolean)}


def value_symbols(vi) -> tuple | None:
    """A ValueInfo's dims with its symbol names (dim_param) as strings, None where a dim has
    neither; None when it has no shape."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else
                 d.dim_param if _symbol(d.dim_param) else None for d in t.shape.dim)


def _symbol(text: str) -> bool:
    """A dim_param that shape_text can carry (not a number, '?', or holding a comma)."""
    return bool(text) and text != "?" and "," not in text and not text.lstrip("-").isdigit()


# -- Slice and Split: a tensor cut where the shape arithmetic says ---------------------------
def _input(node, k: int) -> str | None:
    return node.input[k] if len(node.input) > k and node.input[k] else None


def deferred_slice(r, node, name: str, attrs: dict) -> bool:
    """A Slice with a pending input: folded whole when its data is known too, else an IR Slice
    whose start/stop/step/axes a fold-only node computes. False: the translation's own path."""
    x = node.input[0]
    if "starts" in attrs:                         # opset < 10: the arguments are attributes
        starts = attrs["starts"]
        args = [r.const(f"{name}/{key}", np.array(attrs.get(key, default), np.int64))
                for key, default in (("starts", ()), ("ends", ()),
                                     ("axes", range(len(starts))))] + [None]
    else:
        args = [_input(node, k) for k in range(1, 5)]
    if not (is_pending(r, x) or any(is_late(r, v) for v in args)):
        return False
    for k, v in enumerate(args):
        if v and not is_compile_time(r, v):
            need_compile_time(r, node, k + 1, ("starts", "ends", "axes", "steps")[k])
    if is_known(r, x):
        fold_or_defer(r, "Slice", [x] + args, [node.output[0]], name, fed=True)
        return True
    shape = r.known_shape(x)
    if shape is None:
        r.refuse(f"a Slice with computed starts or ends needs the rank of '{x}', which shape "
                 f"inference did not give{r.unknown_note()}")
    bounds = [f"{name}/{what}" for what in ("start", "stop", "step", "axes")]
    fold_or_defer(r, "SliceBounds", args, bounds, f"{name}/bounds", {"rank": len(shape)},
                  fed=True)
    r.emit("Slice", [x] + bounds, [node.output[0]], name, version="opset8")
    return True


def deferred_split(r, node, name: str, attrs: dict) -> bool:
    """A Split with a pending input: folded whole when its data is known, else IR Slices whose
    bounds a fold-only node computes from the pending sizes. False: the translation's path."""
    x, count = node.input[0], len(node.output)
    sizes = r.const(f"{name}/split", np.array(attrs["split"], np.int64)) \
        if "split" in attrs else _input(node, 1)
    if not (is_pending(r, x) or is_late(r, sizes)):
        return False
    if not is_compile_time(r, sizes):
        need_compile_time(r, node, 1, "split")
    axis = int(attrs.get("axis", 0))
    if is_known(r, x):
        fold_or_defer(r, "Split", [x, sizes], list(node.output), name,
                      {"axis": axis, "outputs": count}, fed=True)
        return True
    shape = r.known_shape(x)
    if shape is None or not -len(shape) <= axis < len(shape) or shape[axis] is None:
        r.refuse(f"a Split with computed sizes needs the size of axis {axis} of '{x}', found "
                 f"{r.describe_shape(x)}")
    axis %= len(shape)
    bounds = [f"{name}/{what}{k}" for k in range(count) for what in ("start", "stop")]
    fold_or_defer(r, "SplitBounds", [sizes], bounds, f"{name}/bounds",
                  {"outputs": count, "length": shape[axis]}, fed=True)
    axes = r.const(f"{name}/axes", np.array([axis], np.int64))
    step = r.const(f"{name}/step", np.array([1], np.int64))
    for k, out in enumerate(node.output):
        if out:
            r.emit("Slice", [x, bounds[2 * k], bounds[2 * k + 1], step, axes], [out],
                   name if k == 0 else f"{name}/{k}", version="opset8")
    return True


# -- dims shape inference leaves without a name ----------------------------------------------
class InferredShapes:
    """{value name: dims} of the model for concrete input shapes and the values folded so far:
    ONNX shape inference (shapes.py) run again on the model with its inputs' dims set and the
    nodes that computed the folded values replaced by those values (a Slice end, a Reshape
    target: inference does not compute every one). The shape-folding pass asks it where the
    reader's inference gave a dim no name (unk__N) that the input shapes decide."""

    MAX_KEPT = 16          # sets of input shapes remembered (a plan is compiled per set)

    # the reader's own folded values handed to inference too, up to this size (shape vectors,
    # pads: what inference needs to size a Pad or Reshape; never weights)
    MAX_FOLDED_ELEMENTS = 4096

    def __init__(self, onnx, model, folded: dict | None = None):
        self.onnx = onnx
        self.model = skeleton(onnx, model)      # no weights held: their dims only
        del self.model.graph.value_info[:]      # the symbolic dims of the reader's inference
        self.kept: dict[tuple, dict] = {}
        # values the reader folded at load (a Pad's pads from a static Shape): inference run
        # again knows them, as it knows what the pass folds
        self.folded = {name: value for name, value in (folded or {}).items()
                       if np.asarray(value).size <= self.MAX_FOLDED_ELEMENTS}

    def __call__(self, input_shapes, known: dict | None = None) -> dict[str, tuple]:
        """`known`: value name -> its folded value (numpy), for these input shapes."""
        known = known or {}
        key = (tuple(sorted((n, tuple(s)) for n, s in input_shapes.items())),
               frozenset(known))
        if key not in self.kept:
            if len(self.kept) >= self.MAX_KEPT:
                self.kept.pop(next(iter(self.kept)))
            self.kept[key] = self._infer(dict(key[0]), {**self.folded, **known})
        return self.kept[key]

    def _infer(self, input_shapes, known: dict) -> dict[str, tuple]:
        from onnx import numpy_helper
        model = self.onnx.ModelProto()
        model.CopyFrom(self.model)
        g = model.graph
        computed = [n for n in g.node if n.output and all(o in known for o in n.output if o)
                    and any(n.output)]
        for node in computed:                   # its outputs become initializers
            g.node.remove(node)
            for out in node.output:
                if out:
                    g.initializer.append(numpy_helper.from_array(
                        np.ascontiguousarray(known[out]), out))
        for vi in model.graph.input:
            if vi.name in input_shapes and vi.type.HasField("tensor_type"):
                shape = vi.type.tensor_type.shape
                del shape.dim[:]
                for size in input_shapes[vi.name]:
                    shape.dim.add().dim_value = int(size)
        inferred = infer_shapes(self.onnx, model)
        g = inferred.graph
        return {vi.name: dims for vi in list(g.value_info) + list(g.output)
                if (dims := value_symbols(vi)) is not None}
