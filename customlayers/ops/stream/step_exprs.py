"""The OpenCL C of the step kernel's per-channel ops (step_kernel.py): each pointwise kind and
binary op of program.py as an expression of `x` (or of its two operands), and float literals
that give back the float32 exactly."""
from __future__ import annotations

import math

import numpy as np

from .program import BINARY, POINTWISE


def literal(v) -> str:
    """`v` as a float32 literal of OpenCL C (INFINITY and NAN by name)."""
    v = float(np.float32(v))
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    return f"{v!r}f"


POINTWISE_CL = {
    "identity": "x", "relu": "(x < 0.0f ? 0.0f : x)", "sigmoid": "1.0f / (1.0f + exp(-x))",
    "tanh": "tanh(x)", "exp": "exp(x)", "log": "log(x)", "abs": "fabs(x)", "neg": "-x",
    "sqrt": "sqrt(x)", "erf": "erf(x)",
    "softplus": "fmax(x, 0.0f) + log1p(exp(-fabs(x)))",
    "silu": "x / (1.0f + exp(-x))",
    "leaky_relu": "(x >= 0.0f ? x : {0} * x)",
    "elu": "(x >= 0.0f ? x : {0} * expm1(x))",
    # (a NaN kept, as the ops keep it: fmax(NaN, lo) is lo)
    "clip": "(isnan(x) ? x : fmin(fmax(x, {0}), {1}))",
    "gelu_erf": "0.5f * x * (1.0f + erf(x * 0.70710678118654752f))",
    "gelu_tanh": "0.5f * x * (1.0f + tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)))",
    "hard_sigmoid": "(isnan(x) ? x : clamp({0} * x + {1}, 0.0f, 1.0f))",
}
BINARY_CL = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
             "div": "({0} / {1})", "max": "fmax({0}, {1})", "min": "fmin({0}, {1})"}
assert set(POINTWISE_CL) == set(POINTWISE) and set(BINARY_CL) == set(BINARY)
