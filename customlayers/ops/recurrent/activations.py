"""The activation functions ONNX's recurrent ops take by name (the `activations` attribute of
LSTM, GRU and RNN), as C expressions in `x` with their alpha and beta baked in.

The IR node names each function by its lower-case key and gives one alpha and one beta per
function (the ONNX translation, graph/onnx/ops/recurrent.py, hands the model's lists out and
fills in the defaults); a function that takes no alpha or beta ignores its value.
"""
from __future__ import annotations

from ...errors import BindingError
from .._program import c_float

# C in x, {a} (alpha) and {b} (beta); float literals (in_double makes them double)
FUNCTIONS: dict[str, str] = {
    "sigmoid": "(1.0f / (1.0f + exp(-(x))))",
    "tanh": "tanh(x)",
    "relu": "((x) < 0.0f ? 0.0f : (x))",      # keeps a NaN (fmax would not)
    "affine": "({a} * (x) + {b})",
    "leakyrelu": "((x) >= 0.0f ? (x) : {a} * (x))",
    "thresholdedrelu": "((x) > {a} ? (x) : 0.0f)",
    "scaledtanh": "({a} * tanh({b} * (x)))",
    "hardsigmoid": "(isnan(x) ? (x) : fmax(0.0f, fmin(1.0f, {a} * (x) + {b})))",
    "elu": "((x) >= 0.0f ? (x) : {a} * (exp(x) - 1.0f))",
    "softsign": "((x) / (1.0f + fabs(x)))",
    # log(1 + e^x) without overflowing for a large x
    "softplus": "(fmax((x), 0.0f) + log1p(exp(-fabs(x))))",
}


def c_text(key: str, alpha: float, beta: float, op_type: str) -> str:
    """The C expression of activation `key` in x."""
    text = FUNCTIONS.get(key.lower())
    if text is None:
        raise BindingError(f"{op_type}: activation '{key}' is not one of "
                           f"{', '.join(FUNCTIONS)}")
    return text.format(a=c_float(alpha), b=c_float(beta))
