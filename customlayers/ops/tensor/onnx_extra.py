"""Elementwise functions that ONNX models use and the other op modules do not have: Sign,
SoftSign (opset9), Selu and HardSigmoid (opset1; their parameters are constant inputs, as in the
IR), and Shrink (ONNX only; lambd and bias as attributes); and ConvolutionBackpropData
(ONNX ConvTranspose) on its own gather kernel, onnx_extra_deconv.cl.

The elementwise ones run on the shared unary_map kernel: the parameters are baked into the C
expression, so each parameter set is its own (cached) program and the kernel does no extra reads.
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import (items_per_work_item, c_float,
                       float_compute, global_1d, numel, program_text, shape_of,
                       unary_map_launch)
from .activation import Activation, register_activation
from ..base import Attr, Op, register_op

Sign = register_activation("Sign", "sign(x)",
                           "(x > 0 ? (OUT_TYPE)1 : x < 0 ? (OUT_TYPE)-1 : (OUT_TYPE)0)")
SoftSign = register_activation("SoftSign", "x / (1.0f + fabs(x))")


class _ParamActivation(Activation):
    """An activation whose scalar parameters are the constant inputs 1.. (named `params`);
    `float_fn` uses them as {name}."""
    params: tuple[str, ...] = ()

    @property
    def const_inputs(self):  # type: ignore[override]
        return tuple(range(1, len(self.params) + 1))

    @property
    def input_count(self):  # type: ignore[override]
        return (len(self.params) + 1,) * 2

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

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        load, store = float_compute(inputs[0].dtype)
        self.fn_text(attrs, inputs[0].dtype)          # refuses integer tensors
        fn = self.float_fn.format(**self.values(consts))
        return [unary_map_launch(self.type.lower(), inputs[0], outputs[0], fn=fn, load=load,
                                 store=store, per_item=items_per_work_item(ctx))]


@register_op
class Selu(_ParamActivation):
    type = "Selu"
    params = ("alpha", "lambda")
    float_fn = "({lambda}) * (x > 0.0f ? x : ({alpha}) * (exp(x) - 1.0f))"


@register_op
class HardSigmoid(_ParamActivation):
    type = "HardSigmoid"
    params = ("alpha", "beta")
    # (a NaN kept, as ONNX Runtime keeps it: fmin(1, NaN) is 1)
    float_fn = "(isnan(x) ? x : fmax(0.0f, fmin(1.0f, ({alpha}) * x + ({beta}))))"


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


# onnx_extra_deconv.cl's `geo` after COUNT, in order
_DECONV_GEOMETRY = ("N IC OC ID IH IW OD OH OW KD KH KW SZ SY SX DZ DY DX PZ PY PX "
                    "ICG OCG").split()


@register_op
class ConvolutionBackpropData(Op):
    """ConvolutionBackpropData-1 without the output_shape input: data N,C,[[D,]H,]W, weights
    C_in,C_out/group,[[KD,]KH,]KW (constant or not), explicit pads (a negative pads_end
    widens the output: ONNX's output_shape), output_padding, and this project's `group`
    (ONNX's grouped ConvTranspose; OpenVINO names that one GroupConvolutionBackpropData)."""
    input_count = (2, 2)
    type = "ConvolutionBackpropData"
    attributes = (Attr("strides", "ints", required=True), Attr("dilations", "ints", required=True),
                  Attr("pads_begin", "ints", required=True), Attr("pads_end", "ints", required=True),
                  Attr("output_padding", "ints", ()), Attr("auto_pad", "str", "explicit"),
                  Attr("group", "int", 1))
    _NAMES = ("strides", "dilations", "pads_begin", "pads_end", "output_padding")

    def _geometry(self, attrs, inputs) -> dict[str, int]:
        x, w = shape_of(inputs[0]), shape_of(inputs[1])
        group = attrs["group"]
        if len(inputs) != 2 or len(x) not in (3, 4, 5) or len(w) != len(x) or w[0] != x[1] \
                or group < 1 or x[1] % group:
            raise BindingError(f"{self.type}: expected data N,C,[[D,]H,]W and weights "
                               f"C,C_out/group,[[KD,]KH,]KW with the same C, divided by group "
                               f"{group}; found {[list(shape_of(t)) for t in inputs]}")
        if attrs["auto_pad"] != "explicit" or any(t.dtype != "f32" for t in inputs):
            raise BindingError(f"{self.type}: only explicit padding on f32 tensors is supported")
        k = len(x) - 2
        lift = (lambda v, fill: [fill] * (3 - k) + list(v))   # 1-D, 2-D: depth 1 in front
        x5, w5 = lift(x[2:], 1), lift(w[2:], 1)
        vals = {a: lift(attrs[a] or [0] * k, 1 if a in ("strides", "dilations") else 0)
                for a in self._NAMES}
        if any(len(v) != 3 for v in vals.values()):
            raise BindingError(f"{self.type}: strides, dilations, pads and output_padding need "
                               f"{k} values each")
        out = [s * (i - 1) + op + (kk - 1) * d + 1 - pb - pe for i, kk, s, d, pb, pe, op in zip(
            x5, w5, *(vals[a] for a in self._NAMES))]
        if any(o <= 0 for o in out):
            raise BindingError(f"{self.type}: the output would be {out[3 - k:]} (empty)")
        s, d, p = vals["strides"], vals["dilations"], vals["pads_begin"]
        return dict(N=x[0], IC=x[1], OC=w[1] * group, ID=x5[0], IH=x5[1], IW=x5[2],
                    OD=out[0], OH=out[1], OW=out[2], KD=w5[0], KH=w5[1], KW=w5[2],
                    SZ=s[0], SY=s[1], SX=s[2], DZ=d[0], DY=d[1], DX=d[2],
                    PZ=p[0], PY=p[1], PX=p[2], ICG=x[1] // group, OCG=w[1], RANK=len(x))

    def infer_shapes(self, attrs, inputs, consts):
        g = self._geometry(attrs, inputs)
        spatial = [g["OD"], g["OH"], g["OW"]][5 - g["RANK"]:]
        return [((g["N"], g["OC"], *spatial), "f32")]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        g = self._geometry(attrs, inputs)
        count = numel(outputs[0].shape)
        # the sizes are an argument (onnx_extra_deconv.cl names them): one program for all
        geo = np.array([count, *(g[k] for k in _DECONV_GEOMETRY)], np.int32)
        src = program_text("deconv", {}, "onnx_extra_deconv.cl")
        return [KernelLaunch(src, "deconv", (Arg.input(0), Arg.input(1), Arg.output(0),
                                             Arg.const(geo)),
                             global_1d(count), label=f"deconv_{g['KD']}x{g['KH']}x{g['KW']}")]
