"""ONNX -> IR translations of the tensor plumbing: shape ops, layout ops, slicing, padding,
constants and casts.

Where every input is a constant (shape arithmetic), the result is folded into a constant
instead of emitting a node: the network is compiled for static shapes. Where an input is
known only per request's shapes (a Shape of a tensor with a symbolic batch), the op is kept
for the shape-folding pass (deferred.py).
"""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ...limits import MAX_DIM, element_count
from ..checks import enum_name
from ..deferred import (cast_attrs, deferred_slice, deferred_split, fold_or_defer, is_known,
                       is_late, is_pending, need_compile_time, try_shape_arithmetic)
from ..translate import (axis_in, const_input, ints_text, optional_input, rank_of, text_attr,
                         translates)

# a Transpose of an integer constant up to this size is shape arithmetic, folded at load
SHAPE_TRANSPOSE_ELEMENTS = 4096

# A constant the reader computes itself (ConstantOfShape) is held in memory while reading
MAX_FOLDED_BYTES = 2**30


@translates("Concat")
def _concat(r, node, name: str, attrs: dict) -> None:
    axis = int(attrs.get("axis", 1))
    if try_shape_arithmetic(r, node, name, {"axis": axis}):
        return
    rank = len(r.shape_of(node.input[0]))
    if rank:
        axis = axis_in(r, axis, rank)
    r.emit("Concat", list(node.input), [node.output[0]], name, {"axis": str(axis)})


@translates("Reshape")
def _reshape(r, node, name: str, attrs: dict) -> None:
    inputs = list(node.input)
    if len(inputs) == 1:                       # opset < 5: the shape is an attribute
        inputs.append(r.const(f"{name}/shape", np.array(attrs.get("shape", []), np.int64)))
    if try_shape_arithmetic(r, node, name, {"allowzero": int(attrs.get("allowzero", 0))},
                            inputs[:2]):
        return
    special_zero = "false" if attrs.get("allowzero", 0) else "true"
    r.emit("Reshape", inputs[:2], [node.output[0]], name, {"special_zero": special_zero})


@translates("Flatten")
def _flatten(r, node, name: str, attrs: dict) -> None:
    shape = r.shape_of(node.input[0])
    axis = int(attrs.get("axis", 1))
    if shape:
        axis = axis_in(r, axis, len(shape), end=True)
    if shape and all(d is not None for d in shape):
        target = [int(np.prod(shape[:axis], dtype=np.int64)),
                  int(np.prod(shape[axis:], dtype=np.int64))]
        special_zero = "false"
    elif axis == 1:
        target, special_zero = [0, -1], "true"  # keep dim 0 as it comes, fold the rest
    else:
        r.refuse(f"Flatten at axis {axis} needs a static input shape, found "
                 f"{r.describe_shape(node.input[0])}")
    r.emit("Reshape", [node.input[0], r.const(f"{name}/shape", np.array(target, np.int64))],
           [node.output[0]], name, {"special_zero": special_zero})


@translates("Transpose")
def _transpose(r, node, name: str, attrs: dict) -> None:
    perm = attrs.get("perm")
    if perm is None:
        rank = len(r.shape_of(node.input[0]))
        if not rank:
            r.refuse("Transpose without 'perm' needs the input's rank")
        perm = list(reversed(range(rank)))
    rank = len(r.shape_of(node.input[0]))
    if sorted(perm) != list(range(len(perm))) or (rank and len(perm) != rank):
        r.refuse(f"perm {list(perm)} is not a permutation of the input's "
                 f"{rank or len(perm)} axes")
    # shape arithmetic (torch writes F.pad's pads as Reshape, Slice, Transpose of a shape); a
    # large constant (weights) stays a layer, as it was
    folded = r.folded(node.input[0])
    small = folded is None or folded.size <= SHAPE_TRANSPOSE_ELEMENTS
    if small and try_shape_arithmetic(r, node, name, {"perm": ints_text(perm)}):
        return
    order = r.const(f"{name}/order", np.array(perm, np.int64))
    r.emit("Transpose", [node.input[0], order], [node.output[0]], name)


@translates("Unsqueeze", "Squeeze")
def _squeeze(r, node, name: str, attrs: dict) -> None:
    inputs = [i for i in node.input if i]
    if len(inputs) == 1 and "axes" in attrs:   # opset < 13: axes is an attribute
        inputs.append(r.const(f"{name}/axes", np.array(attrs["axes"], np.int64)))
    if try_shape_arithmetic(r, node, name, inputs=inputs):
        return
    if len(inputs) > 1 and not is_known(r, inputs[1]) and not r.is_graph_input(inputs[1]):
        r.refuse(f"the axes (input 1, '{inputs[1]}') must be a constant or a graph input: the "
                 f"network compiles them in, and these are computed at run time")
    r.emit(node.op_type, inputs, [node.output[0]], name)


@translates("Dropout", "Identity")
def _identity(r, node, name: str, attrs: dict) -> None:
    x = r.alias.get(node.input[0], node.input[0])
    if node.op_type == "Dropout":
        _check_inference_dropout(r, node, name)
        if len(node.output) > 1 and node.output[1]:
            _dropout_mask(r, x, node.output[1], name)
    r.alias[node.output[0]] = x


def _dropout_mask(r, x: str, out: str, name: str) -> None:
    """Dropout's mask where it passes its input through: every element kept (true, held as
    u8): a constant, or made per plan from the input's shape where that is symbolic."""
    shape = r.known_shape(x)
    if shape is not None and all(d is not None for d in shape):
        r.consts[out] = np.ones(shape, np.uint8)
        return
    fold_or_defer(r, "Shape", [x], [f"{name}/mask_shape"], f"{name}/mask_shape")
    fold_or_defer(r, "ConstantOfShape", [f"{name}/mask_shape", r.const(f"{name}/true", np.ones(1, np.uint8))],
                  [out], f"{name}/mask")


def _check_inference_dropout(r, node, name: str) -> None:
    """A Dropout passes its input through in inference, and in training with ratio 0 (ONNX:
    nothing dropped). A training_mode (opset 12+) that is true with another ratio asks for the
    random mask of training, refused; one the caller feeds is checked per plan."""
    mode = optional_input(node, 2)
    if mode is None:
        return
    ratio = optional_input(node, 1)
    mode_value = r.folded(mode)
    if mode_value is not None and mode_value.size == 1 and not bool(mode_value.reshape(-1)[0]):
        return                                    # inference: the ratio does not matter
    ratio_value = r.folded(ratio) if ratio else np.float32(0.5)
    if mode_value is not None and ratio_value is not None:
        _check_dropout_values(r, mode_value, ratio_value, mode, ratio)
        return
    if ratio:
        need_compile_time(r, node, 1, "ratio")
    need_compile_time(r, node, 2, "training_mode")
    fold_or_defer(r, "DropoutCheck", [ratio or r.const(f"{name}/ratio", np.float32(0.5)), mode],
                  [f"{name}/checked"], f"{name}/check", fed=True)


def _check_dropout_values(r, mode_value, ratio_value, mode: str, ratio) -> None:
    if mode_value.size != 1:
        r.refuse(f"training_mode (input 2, '{mode}') must be a scalar, found shape "
                 f"{list(mode_value.shape)}")
    rate = float(np.asarray(ratio_value).reshape(-1)[0])
    if bool(mode_value.reshape(-1)[0]) and rate != 0:
        given = "the default" if ratio is None else f"input 1, '{ratio}'"
        r.refuse(f"training_mode (input 2, '{mode}') is true with ratio {rate:g} ({given}): "
                 f"training-mode Dropout (a random mask) is a training op, not supported; "
                 f"inference runs it with training_mode false or absent, or ratio 0")


@translates("Constant")
def _constant(r, node, name: str, attrs: dict) -> None:
    if "value" in attrs:
        r.consts[node.output[0]] = r.tensor(attrs["value"], f"{r.where}: attribute 'value'")
        return
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            r.consts[node.output[0]] = np.array(attrs[key], dtype)
            return
    r.refuse(f"a Constant needs one of value, value_float(s), value_int(s); found "
             f"{', '.join(attrs) or 'none'}")


@translates("ConstantOfShape")
def _constant_of_shape(r, node, name: str, attrs: dict) -> None:
    shape = r.folded(node.input[0])
    if is_late(r, node.input[0]):                 # computed from shapes, or fed: per plan
        fill = r.tensor(attrs["value"], f"{r.where}: attribute 'value'") \
            if "value" in attrs else np.zeros((1,), np.float32)
        fold_or_defer(r, "ConstantOfShape", [node.input[0], r.const(f"{name}/value", fill)],
                      [node.output[0]], name, fed=True)
        return
    if shape is None:
        r.refuse(f"the shape (input 0, '{node.input[0]}') must be a constant, shape arithmetic "
                 f"or a graph input (the result is folded into a Const per plan); this one is "
                 f"computed at run time by a layer")
    fill = np.asarray(r.tensor(attrs["value"], f"{r.where}: attribute 'value'")
                      if "value" in attrs else np.float32(0))
    if fill.size != 1:
        r.refuse(f"the fill value must hold one element, found shape {list(fill.shape)}")
    if shape.ndim != 1 or shape.dtype.kind not in "iu":
        r.refuse(f"the shape must be a 1-D integer tensor, found {shape.dtype} of shape "
                 f"{list(shape.shape)}")
    dims = [int(d) for d in shape]
    if any(not 0 <= d <= MAX_DIM for d in dims) or \
            element_count(dims) * fill.itemsize > MAX_FOLDED_BYTES:
        r.refuse(f"shape {dims} is negative or too large (the constant is made while reading: "
                 f"at most {MAX_FOLDED_BYTES} bytes)")
    r.consts[node.output[0]] = np.full(dims, fill.reshape(-1)[0], dtype=fill.dtype)


@translates("Pad")
def _pad(r, node, name: str, attrs: dict) -> None:
    mode = text_attr(r, attrs, "mode", "constant", ("constant", "reflect", "edge", "wrap"))
    x = node.input[0]
    rank = rank_of(r, x, "Pad")
    if "pads" in attrs:                           # opset < 11
        pads, value = list(attrs["pads"]), np.float32(attrs.get("value", 0.0))
    else:
        value = _pad_value(r, node)
        if any(is_late(r, optional_input(node, k)) for k in (1, 3)):
            pads = _late_pads(r, node, name, rank)     # known per plan
        else:
            pads = [int(p) for p in const_input(r, node, 1, "pads").reshape(-1)]
    if optional_input(node, 3) and not isinstance(pads, tuple):   # opset 18: some axes
        axes = [axis_in(r, int(a), rank, "axes entry")
                for a in const_input(r, node, 3, "axes").reshape(-1)]
        if len(pads) != 2 * len(axes):
            r.refuse(f"pads has {len(pads)} values; {len(axes)} axes need {2 * len(axes)}")
        full = [0] * (2 * rank)
        for k, a in enumerate(axes):
            full[a], full[rank + a] = pads[k], pads[len(axes) + k]
        pads = full
    if isinstance(pads, list):
        if len(pads) != 2 * rank:
            r.refuse(f"pads has {len(pads)} values; the input of rank {rank} needs {2 * rank}")
        pads = (r.const(f"{name}/pads_begin", np.array(pads[:rank], np.int64)),
                r.const(f"{name}/pads_end", np.array(pads[rank:], np.int64)))
    inputs = [x, *pads]
    if mode == "constant" and value is not None:
        inputs.append(value if isinstance(value, str) else
                      r.const(f"{name}/pad_value", np.asarray(value)))
    r.emit("Pad", inputs, [node.output[0]], name, {"pad_mode": mode}, version="opset12")


def _pad_value(r, node):
    """The constant_value (input 2): a scalar constant, the value name of one fed as a graph
    input (compiled in per value: the IR Pad reads it as a constant), or None when absent."""
    given = optional_input(node, 2)
    if given is None:
        return None
    if r.folded(given) is None:
        return need_compile_time(r, node, 2, "constant_value")
    value = r.folded(given).reshape(-1)
    if value.size != 1:
        r.refuse(f"the constant_value must hold one element, found {value.size}")
    return value[0]


def _late_pads(r, node, name: str, rank: int) -> tuple[str, str]:
    """Pads (or axes) fed or computed from shapes: the names of the IR Pad's pads_begin and
    pads_end, made by a fold-only node once the plan's values are known."""
    pads = need_compile_time(r, node, 1, "pads")
    axes = optional_input(node, 3) and need_compile_time(r, node, 3, "axes")
    begin, end = f"{name}/pads_begin", f"{name}/pads_end"
    fold_or_defer(r, "PadBounds", [pads, axes], [begin, end], f"{name}/pads", {"rank": rank},
                  fed=True)
    return begin, end


@translates("Gather")
def _gather(r, node, name: str, attrs: dict) -> None:
    if try_shape_arithmetic(r, node, name, {"axis": int(attrs.get("axis", 0))}):
        return
    axis = r.const(f"{name}/axis", np.array(int(attrs.get("axis", 0)), np.int64))
    data, idx = r.folded(node.input[0]), r.folded(node.input[1])
    if data is not None and idx is not None:      # shape arithmetic: fold
        a = axis_in(r, int(attrs.get("axis", 0)), data.ndim)
        n = data.shape[a]
        if idx.dtype.kind not in "iu" or idx.size and not (-n <= idx.min() and idx.max() < n):
            r.refuse(f"the indices must be integers from {-n} to {n - 1} (axis {a} of the "
                     f"constant data has {n})")
        r.consts[node.output[0]] = np.take(data, idx, axis=a)
        return
    r.emit("Gather", [node.input[0], node.input[1], axis], [node.output[0]], name,
           {"batch_dims": "0"}, version="opset8")


@translates("Slice")
def _slice(r, node, name: str, attrs: dict) -> None:
    if deferred_slice(r, node, name, attrs):      # computed from shapes: see deferred.py
        return
    if "starts" in attrs:                         # opset < 10
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in const_input(r, node, 1, "starts").reshape(-1)]
        ends = [int(v) for v in const_input(r, node, 2, "ends").reshape(-1)]
        axes = [int(v) for v in const_input(r, node, 3, "axes").reshape(-1)] \
            if optional_input(node, 3) else list(range(len(starts)))
        steps = [int(v) for v in const_input(r, node, 4, "steps").reshape(-1)] \
            if optional_input(node, 4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        r.refuse(f"starts, ends, axes and steps have {len(starts)}, {len(ends)}, {len(axes)} "
                 f"and {len(steps)} values; they need as many each")
    if 0 in steps:
        r.refuse("a step of 0 is not a slice")
    data = r.folded(node.input[0])
    if data is not None:                          # shape arithmetic: fold
        items = [slice(None)] * data.ndim
        for b, e, s, a in zip(starts, ends, steps, axes):
            items[axis_in(r, a, data.ndim, "axes entry")] = slice(b, e, s)
        r.consts[node.output[0]] = data[tuple(items)]
        return
    ints = lambda v, what: r.const(f"{name}/{what}", np.array(v, np.int64))  # noqa: E731
    r.emit("Slice", [node.input[0], ints(starts, "start"), ints(ends, "stop"),
                     ints(steps, "step"), ints(axes, "axes")], [node.output[0]], name,
           version="opset8")


@translates("Split")
def _split(r, node, name: str, attrs: dict) -> None:
    """Split into Slice nodes, one per output."""
    if deferred_split(r, node, name, attrs):      # computed from shapes: see deferred.py
        return
    x = node.input[0]
    shape = r.shape_of(x)
    rank = rank_of(r, x, "Split")
    axis = axis_in(r, int(attrs.get("axis", 0)), rank)
    if "split" in attrs:
        sizes = list(attrs["split"])
    elif optional_input(node, 1):
        sizes = [int(v) for v in const_input(r, node, 1, "split").reshape(-1)]
    else:
        if shape[axis] is None:
            r.refuse(f"an even split needs the size of axis {axis}, found shape {list(shape)}")
        n = len(node.output)
        chunk = -(-shape[axis] // n)              # opset 18: the last part may be smaller
        sizes = [min(chunk, shape[axis] - k * chunk) for k in range(n)]
    if len(sizes) != len(node.output):
        r.refuse(f"split has {len(sizes)} sizes for {len(node.output)} outputs")
    if any(s < 0 for s in sizes):
        r.refuse(f"split sizes {sizes} include a negative size")
    start = 0
    for k, (size, out) in enumerate(zip(sizes, node.output)):
        ints = lambda v, what: r.const(f"{name}/{what}{k}", np.array(v, np.int64))  # noqa: E731
        if out:
            r.emit("Slice", [x, ints([start], "start"), ints([start + size], "stop"),
                             ints([1], "step"), ints([axis], "axes")], [out],
                   name if k == 0 else f"{name}/{k}", version="opset8")
        start += size


@translates("Tile")
def _tile(r, node, name: str, attrs: dict) -> None:
    if try_shape_arithmetic(r, node, name):
        return
    r.emit("Tile", [node.input[0], node.input[1]], [node.output[0]], name)


@translates("Expand")
def _expand(r, node, name: str, attrs: dict) -> None:
    if try_shape_arithmetic(r, node, name):
        return
    if not is_known(r, node.input[1]) and not r.is_graph_input(node.input[1]):
        r.refuse(f"the shape (input 1, '{node.input[1]}') must be a constant or a graph input: "
                 f"the network compiles it in, and this one is computed at run time")
    r.emit("Broadcast", [node.input[0], node.input[1]], [node.output[0]], name,
           {"mode": "bidirectional"}, version="opset3")


@translates("Shape")
def _shape(r, node, name: str, attrs: dict) -> None:
    """Folded: the executor compiles for static shapes, so a known shape is a constant."""
    shape = r.shape_of(node.input[0])
    if r.known_shape(node.input[0]) is not None and None in shape or \
            is_pending(r, node.input[0]):        # known per request's shapes: the pass folds
        fold_or_defer(r, "Shape", [node.input[0]], [node.output[0]], name,
                      {k: attrs[k] for k in ("start", "end") if k in attrs})
        return
    if not shape or any(d is None for d in shape):
        r.refuse(f"Shape of '{node.input[0]}' is folded into a constant, which needs a static "
                 f"shape; found {r.describe_shape(node.input[0])}")
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    r.consts[node.output[0]] = np.array(shape[start:None if end is None else int(end)], np.int64)


@translates("Cast")
def _cast(r, node, name: str, attrs: dict) -> None:
    to = int(attrs["to"])
    if to not in dtypes.ONNX_TYPES:
        import onnx
        r.refuse(f"Cast to {enum_name(onnx.TensorProto.DataType, to)} is not supported; supported: "
                 f"{dtypes.ONNX_SUPPORTED_TEXT}")
    # a cast to bool is a comparison with 0 (then held as u8), not a truncation to u8
    boolean = to == dtypes.BOOL_ONNX
    ir_type = dtypes.BOOL_IR_ELEMENT_TYPE if boolean else dtypes.ONNX_TYPES[to]
    if is_pending(r, node.input[0]):
        fold_or_defer(r, "Cast", [node.input[0]], [node.output[0]], name, cast_attrs(to))
        return
    folded = r.folded(node.input[0])
    if folded is not None:
        held = dtypes.numpy_of(dtypes.ONNX_TYPES[to])
        r.consts[node.output[0]] = folded.astype(
            dtypes.BOOL_NP_DTYPE if boolean else held).astype(held)
        return
    r.emit("Convert", [node.input[0]], [node.output[0]], name, {"destination_type": ir_type})


@translates("DepthToSpace", "SpaceToDepth")
def _depth_space(r, node, name: str, attrs: dict) -> None:
    mode = text_attr(r, attrs, "mode", "DCR", ("DCR", "CRD"))
    block = int(attrs["blocksize"])
    if block < 1:
        r.refuse(f"blocksize {block} is not a positive size")
    r.emit(node.op_type, [node.input[0]], [node.output[0]], name,
           {"block_size": str(block),
            "mode": "depth_first" if mode == "CRD" else "blocks_first"})
