"""Elementwise functions that ONNX models use and the other op modules do not have: Sign,
SoftSign (opset9), Selu and HardSigmoid (opset1; their parameters are constant inputs, as in the
IR), and Shrink (ONNX only; lambd and bias as attributes).

All run on the shared unary_map kernel: the parameters are baked into the C expression, so each
parameter set is its own (cached) program and the kernel does no extra reads.
"""
from __future__ import annotations

import numpy as np

from ..errors import BindingError
from ._program import c_float, float_compute, unary_map_launch
from .activation import Activation, _simple
from .base import Attr, register_op

Sign = _simple("Sign", "sign(x)", "(x > 0 ? (OUT_TYPE)1 : x < 0 ? (OUT_TYPE)-1 : (OUT_TYPE)0)")
SoftSign = _simple("SoftSign", "x / (1.0f + fabs(x))")


class _ParamActivation(Activation):
    """An activation whose scalar parameters are the constant inputs 1.. (named `params`);
    `float_fn` uses them as {name}."""
    params: tuple[str, ...] = ()

    @property
    def const_inputs(self):  # type: ignore[override]
        return tuple(range(1, len(self.params) + 1))

    def values(self, consts) -> dict[str, str]:
        out = {}
        for k, name in enumerate(self.params, 1):
            if k not in consts:
                raise BindingError(f"{self.type}: the {name} (input {k}) must be a constant")
            value = np.asarray(consts[k]).reshape(-1)
            if value.size != 1:
                raise BindingError(f"{self.type}: the {name} (input {k}) must be one value, "
                                   f"found {value.size}")
            out[name] = c_float(float(value[0]))
        return out

    def infer_shapes(self, attrs, inputs, consts):
        if len(inputs) != len(self.params) + 1:
            raise BindingError(f"{self.type}: expected {len(self.params) + 1} inputs (data, "
                               f"{', '.join(self.params)}), found {len(inputs)}")
        self.values(consts)
        return super().infer_shapes(attrs, inputs, consts)

    def launches(self, attrs, inputs, outputs, consts):
        load, store = float_compute(inputs[0].dtype)
        self.fn_text(attrs, inputs[0].dtype)          # refuses integer tensors
        fn = self.float_fn.format(**self.values(consts))
        return [unary_map_launch(self.type.lower(), inputs[0], outputs[0], fn=fn, load=load,
                                 store=store)]


@register_op
class Selu(_ParamActivation):
    type = "Selu"
    params = ("alpha", "lambda")
    float_fn = "({lambda}) * (x > 0.0f ? x : ({alpha}) * (exp(x) - 1.0f))"


@register_op
class HardSigmoid(_ParamActivation):
    type = "HardSigmoid"
    params = ("alpha", "beta")
    float_fn = "fmax(0.0f, fmin(1.0f, ({alpha}) * x + ({beta})))"


@register_op
class Shrink(Activation):
    """ONNX Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0."""
    type = "Shrink"
    attributes = (Attr("lambd", "float", 0.5), Attr("bias", "float", 0.0))
    float_fn = "(x < -{l} ? x + {b} : x > {l} ? x - {b} : 0.0f)"

    def fn_text(self, attrs, dtype):
        super().fn_text(attrs, dtype)
        return self.float_fn.format(l=f"({c_float(attrs['lambd'])})",
                                    b=f"({c_float(attrs['bias'])})")
