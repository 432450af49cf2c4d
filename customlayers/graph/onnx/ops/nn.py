"""ONNX -> IR translations of the neural-network ops: convolutions, pooling, Gemm/MatMul,
normalizations and the softmax family.

Constant inputs are folded where the IR wants a different layout (grouped weights, biases
reshaped to 1,C,1,1, BatchNorm turned into one scale and one shift).
"""
from __future__ import annotations

import numpy as np

from ..translate import (axis_in, float_text, intermediate, ints_text, keep_axes, optional_input,
                       rank_of, reshaped, spatial, text_attr, translates)

AUTO_PAD = {"NOTSET": "explicit", "": "explicit", "SAME_UPPER": "same_upper",
            "SAME_LOWER": "same_lower", "VALID": "valid"}


@translates("Conv")
def _conv(r, node, name: str, attrs: dict) -> None:
    x, w = node.input[0], node.input[1]
    wshape = r.shape_of(w)
    if len(wshape) < 3 or any(d is None for d in wshape):
        r.refuse(f"the weights '{w}' need a known shape, found {list(wshape)}")
    k = len(wshape) - 2
    pads = spatial(r, attrs, "pads", 2 * k, 0)
    auto_pad = text_attr(r, attrs, "auto_pad", "NOTSET", AUTO_PAD)
    ir = {"strides": ints_text(spatial(r, attrs, "strides", k, 1)),
          "dilations": ints_text(spatial(r, attrs, "dilations", k, 1)),
          "pads_begin": ints_text(pads[:k]), "pads_end": ints_text(pads[k:]),
          "auto_pad": AUTO_PAD[auto_pad]}
    group = int(attrs.get("group", 1))
    if group < 1 or wshape[0] % group:
        r.refuse(f"group {group} does not divide the {wshape[0]} output channels of the weights")
    has_bias = len(node.input) > 2 and node.input[2]
    out = f"{node.output[0]}/conv" if has_bias else node.output[0]
    out_shape = [r.shape_of(node.output[0])] if has_bias else None
    # the convolution takes the node's name (profiles and traces show it, and the bias Add is
    # fused into it); the Add of the bias is "<name>/add_bias"
    if group == 1:
        r.emit("Convolution", [x, w], [out], name, ir, shapes=out_shape)
    else:
        grouped = [group, wshape[0] // group] + list(wshape[1:])
        wg = reshaped(r, w, grouped, f"{name}/grouped_weights")
        r.emit("GroupConvolution", [x, wg], [out], name, ir, shapes=out_shape)
    if has_bias:
        rank = len(r.shape_of(out)) or k + 2
        bias = reshaped(r, node.input[2], [1, wshape[0]] + [1] * (rank - 2), f"{name}/bias")
        r.emit("Add", [out, bias], [node.output[0]], f"{name}/add_bias",
               {"auto_broadcast": "numpy"})


@translates("ConvTranspose")
def _conv_transpose(r, node, name: str, attrs: dict) -> None:
    """1-D to 3-D, grouped; pads from auto_pad or output_shape worked out here as ONNX's
    reference does (onnx/reference/ops/op_conv_transpose.py), so the IR op sees explicit
    pads_begin and a pads_end that gives the output its size."""
    x, w = node.input[0], node.input[1]
    wshape = r.shape_of(w)
    if len(wshape) not in (3, 4, 5) or any(d is None for d in wshape):
        r.refuse(f"the weights '{w}' need a known shape of rank 3 to 5 (1-D to 3-D), found "
                 f"{r.describe_shape(w)}")
    k = len(wshape) - 2
    group = int(attrs.get("group", 1))
    strides = spatial(r, attrs, "strides", k, 1)
    dilations = spatial(r, attrs, "dilations", k, 1)
    out_pad = spatial(r, attrs, "output_padding", k, 0)
    if "kernel_shape" in attrs and list(attrs["kernel_shape"]) != list(wshape[2:]):
        r.refuse(f"kernel_shape {list(attrs['kernel_shape'])} is not the weights' "
                 f"{list(wshape[2:])}")
    begin, end = _deconv_pads(r, node, attrs, k, wshape, strides, dilations, out_pad)
    sized = end is not None                    # pads_end gives the size: no output_padding
    ir = {"strides": ints_text(strides), "dilations": ints_text(dilations),
          "pads_begin": ints_text(begin),
          "pads_end": ints_text(end if sized else spatial(r, attrs, "pads", 2 * k, 0)[k:]),
          "output_padding": ints_text([0] * k if sized else out_pad), "group": str(group)}
    bias = optional_input(node, 2)
    out = f"{node.output[0]}/deconv" if bias else node.output[0]
    r.emit("ConvolutionBackpropData", [x, w], [out], out if bias else name, ir,
           shapes=[r.shape_of(node.output[0])] if bias else None)
    if bias:
        b = reshaped(r, bias, [1, wshape[1] * group] + [1] * k, f"{name}/bias")
        r.emit("Add", [out, b], [node.output[0]], name, {"auto_broadcast": "numpy"})


def _deconv_pads(r, node, attrs, k, wshape, strides, dilations, out_pad):
    """(pads_begin, pads_end): pads_end None where the explicit pads and output_padding say
    the output size. With output_shape (the pads are then ignored) or auto_pad SAME_*, the
    padding that gives the output_shape (default: the input size times the stride), split as
    ONNX's spec and ONNX Runtime do: SAME_UPPER puts the odd one at the end, else at the
    start. That needs the input's spatial dims."""
    auto_pad = text_attr(r, attrs, "auto_pad", "NOTSET", AUTO_PAD)
    if "output_shape" not in attrs and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        return spatial(r, attrs, "pads", 2 * k, 0)[:k], None
    dims = r.known_shape(node.input[0])
    if dims is None or len(dims) != k + 2 or any(d is None for d in dims[2:]):
        r.refuse(f"output_shape or auto_pad={auto_pad} needs the input's spatial dims, found "
                 f"{r.describe_shape(node.input[0])}")
    size = list(dims[2:])
    full = [s * (i - 1) + op + (kk - 1) * d + 1
            for i, kk, s, d, op in zip(size, wshape[2:], strides, dilations, out_pad)]
    target = list(attrs.get("output_shape") or [i * s for i, s in zip(size, strides)])
    target = target[-k:] if len(target) == k + 2 else target
    if len(target) != k:
        r.refuse(f"output_shape {list(attrs['output_shape'])} has {len(target)} values; "
                 f"{k} are needed")
    total = [f - t for f, t in zip(full, target)]
    begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    # the IR op then runs without output_padding: the end padding alone sizes the output
    return begin, [f - op - t - b for f, op, t, b in zip(full, out_pad, target, begin)]


@translates("CausalConvWithState")
def _causal_conv_with_state(r, node, name: str, attrs: dict) -> None:
    """Opset 27, onto the built-in op of the same name (ops/nn/causal_conv.py): the optional
    bias and past_state follow input and weight where given, flagged has_bias and
    has_past_state. The present_state keeps its ONNX name, so that a user can feed it back as
    the next call's past_state, or passes/state/binding.py can bind the pair to a state."""
    activation = text_attr(r, attrs, "activation", "none", ("none", "silu", "swish"))
    bias, past = optional_input(node, 2), optional_input(node, 3)
    ir = {"activation": activation, "has_bias": "true" if bias else "false",
          "has_past_state": "true" if past else "false"}
    present = node.output[1] if len(node.output) > 1 and node.output[1] else \
        f"{name}/present_state"
    inputs = [node.input[0], node.input[1]] + [v for v in (bias, past) if v]
    wshape = r.known_shape(node.input[1])
    if wshape is not None and len(wshape) == 3 and wshape[2] == 1:
        # kernel size 1: no state; present_state (N, C, 0) has no element, which no buffer
        # holds: the op computes output alone (a past_state, empty too, adds nothing), and the
        # empty state is input[..., 0:0]
        ir.update(state_output="false", has_past_state="false")
        r.emit("CausalConvWithState", inputs[:2 + bool(bias)], [node.output[0]], name, ir)
        ints = lambda v, what: r.const(f"{name}/present_state/{what}",  # noqa: E731
                                       np.array(v, np.int64))
        r.emit("Slice", [node.input[0], ints([0], "start"), ints([0], "stop"), ints([1], "step"),
                         ints([2], "axes")], [present], f"{name}/present_state",
               version="opset8")
        return
    r.emit("CausalConvWithState", inputs, [node.output[0], present], name, ir)


def _pool_attrs(r, attrs: dict) -> dict[str, str]:
    """The IR attributes of an ONNX MaxPool or AveragePool, dilations included (opset1 names
    them for neither; MaxPool-8 and this project's AvgPool read them)."""
    kernel = list(attrs.get("kernel_shape") or [])
    if not kernel:
        r.refuse("kernel_shape is required")
    k = len(kernel)
    pads = spatial(r, attrs, "pads", 2 * k, 0)
    dilations = spatial(r, attrs, "dilations", k, 1)
    auto_pad = AUTO_PAD[text_attr(r, attrs, "auto_pad", "NOTSET", AUTO_PAD)]
    ceil = bool(attrs.get("ceil_mode", 0))
    if auto_pad in ("same_upper", "same_lower") and any(d != 1 for d in dilations):
        # ONNX's shape inference pads for the dilated window, ONNX Runtime for the undilated
        # one: the two give different shapes and numbers
        r.refuse(f"auto_pad={auto_pad.upper()} with dilations {dilations} is not supported "
                 f"(ONNX's shape inference and ONNX Runtime pad it differently); give explicit "
                 f"pads")
    if auto_pad == "valid" and ceil:
        auto_pad = "explicit"      # ONNX Runtime rounds VALID up too: no pads, ceil rounding
    ir = {"strides": ints_text(spatial(r, attrs, "strides", k, 1)),
          "pads_begin": ints_text(pads[:k]), "pads_end": ints_text(pads[k:]),
          "kernel": ints_text(kernel),
          # ONNX's ceil_mode drops a last window that would start in the end padding (as
          # PyTorch does): the IR's ceil_torch; its "ceil" (OpenVINO opset1) keeps it
          "rounding_type": "ceil_torch" if ceil else "floor",
          "auto_pad": auto_pad}
    if any(d != 1 for d in dilations):
        ir["dilations"] = ints_text(dilations)
    return ir


@translates("MaxPool")
def _max_pool(r, node, name: str, attrs: dict) -> None:
    """With its Indices output, a MaxPool-8 whose indices count from axis 0: ONNX's flat index
    into the whole input, padding not counted (an unread one is dropped again before it runs:
    passes/unused_outputs.py)."""
    indices = node.output[1] if len(node.output) > 1 and node.output[1] else None
    if indices and int(attrs.get("storage_order", 0)) != 0:
        r.refuse("the Indices output in column-major order (storage_order=1) is not supported")
    ir = _pool_attrs(r, attrs)
    version = "opset8" if "dilations" in ir else "opset1"
    if indices:
        ir.update(index_element_type="i64", axis="0")
        version = "opset8"
        r.info[indices] = (r.info.get(indices, (None, ""))[0], "i64")  # whatever inference says
    r.emit("MaxPool", [node.input[0]], [node.output[0]] + ([indices] if indices else []), name,
           ir, version=version)


@translates("AveragePool")
def _avg_pool(r, node, name: str, attrs: dict) -> None:
    ir = _pool_attrs(r, attrs)
    # ONNX counts padding only when asked; the IR says the opposite way round
    ir["exclude-pad"] = "false" if attrs.get("count_include_pad", 0) else "true"
    r.emit("AvgPool", [node.input[0]], [node.output[0]], name, ir)


@translates("LpPool")
def _lp_pool(r, node, name: str, attrs: dict) -> None:
    """The p-norm of each window (p an int, default 2), on the pooling attributes."""
    p = int(attrs.get("p", 2))
    if p < 1:
        r.refuse(f"attribute p={p} must be 1 or more")
    r.emit("LpPool", [node.input[0]], [node.output[0]], name, dict(_pool_attrs(r, attrs), p=str(p)))


@translates("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(r, node, name: str, attrs: dict) -> None:
    rank = len(r.shape_of(node.input[0]))
    if rank < 3:
        r.refuse(f"the input needs a known rank of 3 or more, found "
                 f"{r.describe_shape(node.input[0])}")
    axes = r.const(f"{name}/axes", np.arange(2, rank, dtype=np.int64))
    ir_type = "ReduceMean" if node.op_type == "GlobalAveragePool" else "ReduceMax"
    r.emit(ir_type, [node.input[0], axes], [node.output[0]], name, {"keep_dims": "true"})


@translates("Gemm")
def _gemm(r, node, name: str, attrs: dict) -> None:
    """Y = alpha * A' B' + beta * C."""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    a, b = node.input[0], node.input[1]
    c = node.input[2] if len(node.input) > 2 and node.input[2] else None
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    out = node.output[0]
    sa, sb = r.shape_of(a), r.shape_of(b)
    mm_shape = ((sa[1] if ta else sa[0]) if len(sa) == 2 else None,
                (sb[0] if tb else sb[1]) if len(sb) == 2 else None)
    steps = (["scale"] if alpha != 1.0 else []) + (["bias"] if c else [])
    current = out if not steps else f"{name}/matmul"
    r.emit("MatMul", [a, b], [current], name if not steps else current,
           {"transpose_a": "true" if ta else "false", "transpose_b": "true" if tb else "false"},
           shapes=None if not steps else [mm_shape])
    if alpha != 1.0:
        nxt = out if steps[-1] == "scale" else f"{name}/alpha"
        r.emit("Multiply", [current, r.const(f"{name}/alpha_value", np.float32(alpha))], [nxt],
               name if nxt == out else nxt, {"auto_broadcast": "numpy"},
               shapes=None if nxt == out else [mm_shape])
        current = nxt
    if c:
        if beta != 1.0:
            folded = r.folded(c)
            if folded is not None:
                c = r.const(f"{name}/beta_c", (folded * beta).astype(folded.dtype))
            else:
                r.emit("Multiply", [c, r.const(f"{name}/beta_value", np.float32(beta))],
                       [f"{name}/beta_c"], f"{name}/beta_c", {"auto_broadcast": "numpy"},
                       shapes=[r.shape_of(c)])
                c = f"{name}/beta_c"
        r.emit("Add", [current, c], [out], name, {"auto_broadcast": "numpy"})


@translates("MatMul")
def _matmul(r, node, name: str, attrs: dict) -> None:
    r.emit("MatMul", [node.input[0], node.input[1]], [node.output[0]], name,
           {"transpose_a": "false", "transpose_b": "false"})


@translates("BatchNormalization")
def _batch_norm(r, node, name: str, attrs: dict) -> None:
    """Inference form, folded: y = x * a + b, a = scale / sqrt(var + eps), b = B - mean * a."""
    if any(o and r.uses.get(o) for o in node.output[1:]):
        r.refuse("training-mode outputs (running mean/var) are not supported")
    params = [r.folded(v) for v in node.input[1:5]]
    if any(p is None for p in params):
        r.refuse("scale, B, mean and var must be constants (initializers) to be folded")
    scale, bias, mean, var = (p.astype(np.float64).reshape(-1) for p in params)
    if len({scale.size, bias.size, mean.size, var.size}) != 1:
        r.refuse(f"scale, B, mean and var need one value per channel each; found "
                 f"{scale.size}, {bias.size}, {mean.size} and {var.size} values")
    eps = float(attrs.get("epsilon", 1e-5))
    a = scale / np.sqrt(var + eps)
    b = bias - mean * a
    rank = len(r.shape_of(node.input[0])) or 4
    shape = [1, a.size] + [1] * (rank - 2)
    mul = f"{name}/scaled"
    r.emit("Multiply", [node.input[0], r.const(f"{name}/scale", a.astype(np.float32).reshape(
        shape))], [mul], mul, {"auto_broadcast": "numpy"}, shapes=[r.shape_of(node.output[0])])
    r.emit("Add", [mul, r.const(f"{name}/shift", b.astype(np.float32).reshape(shape))],
           [node.output[0]], name, {"auto_broadcast": "numpy"})


@translates("LRN")
def _lrn(r, node, name: str, attrs: dict) -> None:
    # ONNX: x / (bias + alpha / size * sum(x^2))^beta. The IR's LRN divides alpha by
    # size ** len(axes); with axes = [1] that is the same formula, so alpha is kept as written
    # (OpenVINO's own ONNX importer does the same).
    if "size" not in attrs:
        r.refuse("attribute 'size' is required")
    size = int(attrs["size"])
    if size < 1:
        r.refuse(f"size {size} is not a positive window size")
    axes = r.const(f"{name}/axes", np.array([1], np.int64))
    r.emit("LRN", [node.input[0], axes], [node.output[0]], name, {
        "alpha": float_text(attrs.get("alpha", 1e-4)), "beta": float_text(attrs.get("beta", 0.75)),
        "bias": float_text(attrs.get("bias", 1.0)), "size": str(size)})


@translates("InstanceNormalization")
def _instance_norm(r, node, name: str, attrs: dict) -> None:
    """(x - mean) / sqrt(var + eps) * scale + B over the spatial axes of each (n, c)."""
    x = node.input[0]
    shape = r.shape_of(x)
    rank = rank_of(r, x, "InstanceNormalization")
    ax = r.const(f"{name}/axes", np.arange(2, rank, dtype=np.int64))
    kept = keep_axes(shape, range(2, rank))
    per_channel = [-1] + [1] * (rank - 2)
    scale = reshaped(r, node.input[1], per_channel, f"{name}/scale")
    bias = reshaped(r, node.input[2], per_channel, f"{name}/bias")
    eps = r.const(f"{name}/eps", np.float32(attrs.get("epsilon", 1e-5)))
    nb = {"auto_broadcast": "numpy"}
    mean = intermediate(r, "ReduceMean", [x, ax], f"{name}/mean", kept, {"keep_dims": "true"})
    d = intermediate(r, "Subtract", [x, mean], f"{name}/centered", shape, nb)
    sq = intermediate(r, "Multiply", [d, d], f"{name}/square", shape, nb)
    var = intermediate(r, "ReduceMean", [sq, ax], f"{name}/var", kept, {"keep_dims": "true"})
    var_eps = intermediate(r, "Add", [var, eps], f"{name}/var_eps", kept, nb)
    std = intermediate(r, "Sqrt", [var_eps], f"{name}/std", kept)
    n = intermediate(r, "Divide", [d, std], f"{name}/normalized", shape, nb)
    scaled = intermediate(r, "Multiply", [n, scale], f"{name}/scaled", shape, nb)
    r.emit("Add", [scaled, bias], [node.output[0]], name, nb)


@translates("Softmax")
def _softmax(r, node, name: str, attrs: dict) -> None:
    _softmax_like(r, node, name, attrs, "SoftMax")


@translates("LogSoftmax")
def _log_softmax(r, node, name: str, attrs: dict) -> None:
    """One LogSoftmax (x - max - log(sum(exp(x - max))): exact where log(softmax) would
    underflow to -inf), not six elementwise and reduction layers."""
    _softmax_like(r, node, name, attrs, "LogSoftmax")


@translates("Hardmax")
def _hardmax(r, node, name: str, attrs: dict) -> None:
    """The one-hot of the first largest value (opset 13); before, of the input flattened to
    2-D at `axis`, as Softmax was."""
    _softmax_like(r, node, name, attrs, "Hardmax")


def _softmax_like(r, node, name: str, attrs: dict, op_type: str) -> None:
    shape = r.shape_of(node.input[0])
    rank = len(shape)
    opset = r.opset.get("ai.onnx", 13)
    axis = int(attrs.get("axis", 1 if opset < 13 else -1))
    if rank:
        axis = axis_in(r, axis, rank)
    elif axis < 0:
        r.refuse("a negative axis needs the input's rank, which shape inference did not give")
    if opset >= 13 or axis == rank - 1:
        r.emit(op_type, [node.input[0]], [node.output[0]], name, {"axis": str(axis)})
        return
    # opset < 13: over the input flattened to 2-D at `axis`, then the shape restored
    if any(d is None for d in shape):
        r.refuse(f"opset-{opset} {node.op_type} flattens at axis {axis}; that needs a static "
                 f"input shape, found {list(shape)}")
    flat = [int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))]
    flat_in = reshaped(r, node.input[0], flat, f"{name}/flat")
    r.emit(op_type, [flat_in], [f"{name}/flat_out"], f"{name}/flat_out",
           {"axis": "1"}, shapes=[tuple(flat)])
    shape_const = r.const(f"{name}/shape", np.array(shape, np.int64))
    r.emit("Reshape", [f"{name}/flat_out", shape_const],
           [node.output[0]], name, {"special_zero": "false"})
