"""ONNX CausalConvWithState (opset 27) on causal_conv.cl: a causal depthwise 1-D convolution of
input (N, C, L) with weight (C, 1, K), an optional bias (C), over past_state (N, C, K-1) or zeros
before it, SiLU fused where asked; present_state (N, C, K-1) is the last K-1 positions of
past_state ++ input, for the next call. One launch writes both outputs; the sizes are kernel
arguments, so one program per variant (element type, bias, past_state, activation) serves every
shape, as a streamed model's changing chunk lengths need.

IR attributes: activation ("none", "silu", "swish": the ONNX names), has_bias and has_past_state
(which optional inputs follow input and weight, in that order), and state_output (default true;
false only with K = 1, whose present_state has no element: a tensor no buffer can hold, so the
node has the one output and the translation makes the empty state apart). The semantics are the ONNX
reference's (onnx/reference/ops/op_causal_conv_with_state.py).
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, program_text, shape_of
from ..base import Attr, Op, register_op

ACTIVATIONS = ("none", "silu", "swish")
# element type -> (storage type, arithmetic type, LOAD(p, i), STORE(p, i, v))
_TYPES = {
    "f32": ("float", "float", "((p)[i])", "((p)[i] = (v))"),
    "f64": ("double", "double", "((p)[i])", "((p)[i] = (v))"),
    # half only behind pointers: no cl_khr_fp16 (ops/_half_io.py)
    "f16": ("half", "float", "vload_half(i, p)", "vstore_half_rte(v, i, p)"),
}
_INT_LIMIT = 2 ** 31 - 1      # the kernel indexes with int


@register_op
class CausalConvWithState(Op):
    type = "CausalConvWithState"
    input_count = (2, 4)
    reads_half = True           # vload_half/vstore_half_rte: no float copies of half tensors
    attributes = (Attr("activation", "str", "none"), Attr("has_bias", "bool", False),
                  Attr("has_past_state", "bool", False), Attr("state_output", "bool", True))

    def _geometry(self, attrs, inputs) -> tuple[int, int, int, int]:
        """(N, C, L, K), every input checked against them."""
        op = self.type
        names = ["input", "weight"] + ["bias"] * attrs["has_bias"] + \
            ["past_state"] * attrs["has_past_state"]
        if len(inputs) != len(names):
            raise BindingError(f"{op}: expected {len(names)} inputs ({', '.join(names)}), "
                               f"found {len(inputs)}")
        if attrs["activation"] not in ACTIVATIONS:
            raise BindingError(f"{op}: activation '{attrs['activation']}' is not one of "
                               f"{', '.join(ACTIVATIONS)}")
        dtype = inputs[0].dtype
        if dtype not in _TYPES or any(t.dtype != dtype for t in inputs):
            raise BindingError(f"{op}: the inputs must share one element type of "
                               f"{', '.join(_TYPES)}; found "
                               f"{', '.join(f'{n} {t.dtype}' for n, t in zip(names, inputs))}")
        x, w = shape_of(inputs[0]), shape_of(inputs[1])
        if len(x) != 3 or len(w) != 3 or w[0] != x[1] or w[1] != 1 or w[2] < 1:
            raise BindingError(f"{op}: expected input (N, C, L) and weight (C, 1, K) with K >= 1; "
                               f"found input {list(x)} and weight {list(w)}")
        n, c, length = x
        k = w[2]
        given = dict(zip(names, inputs))
        for what, want in (("bias", (c,)), ("past_state", (n, c, k - 1))):
            if what in given and shape_of(given[what]) != want:
                raise BindingError(f"{op}: {what} must be {list(want)} (input {list(x)}, "
                                   f"weight {list(w)}); found {list(shape_of(given[what]))}")
        if not attrs["state_output"] and k != 1:
            raise BindingError(f"{op}: state_output=false is only for a kernel of size 1 (no "
                               f"state); the weight has {k} taps")
        if n * c * (length + k - 1) > _INT_LIMIT or c * k > _INT_LIMIT:
            raise BindingError(f"{op}: input {list(x)} with {k} taps has more than "
                               f"{_INT_LIMIT} elements, which the kernel's int indices "
                               f"do not reach")
        return n, c, length, k

    def infer_shapes(self, attrs, inputs, consts):
        n, c, length, k = self._geometry(attrs, inputs)
        dtype = inputs[0].dtype
        state = [((n, c, k - 1), dtype)] if attrs["state_output"] else []
        return [((n, c, length), dtype)] + state

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        n, c, length, k = self._geometry(attrs, inputs)
        dtype = inputs[0].dtype
        storage, acc, load, store = _TYPES[dtype]
        silu = attrs["activation"] != "none"
        values = {"T": storage, "ACC": acc, "LOAD(p, i)": load, "STORE(p, i, v)": store,
                  "HAS_BIAS": int(attrs["has_bias"]), "HAS_PAST": int(attrs["has_past_state"]),
                  "SILU": int(silu), "HAS_PRESENT": int(attrs["state_output"])}
        count = n * c * (length + k - 1)
        args = [Arg.input(i) for i in range(len(inputs))] + \
            [Arg.output(j) for j in range(1 + attrs["state_output"])]
        args += [Arg.scalar(np.int32(v)) for v in (n * c, c, length, k)]
        label = f"causal_conv_with_state_{dtype}{'_silu' if silu else ''}"
        # half_arithmetic=False: `half` names only pointer targets here
        source = program_text(label, values, "causal_conv.cl", half_arithmetic=False)
        return [KernelLaunch(source, "causal_conv_with_state", tuple(args), global_1d(count),
                             label=label)]
