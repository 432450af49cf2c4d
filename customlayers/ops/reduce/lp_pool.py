"""ONNX LpPool (opset 18/22): the p-norm of each window, 1-D, 2-D or 3-D, with strides,
dilations, explicit or SAME/VALID padding and ceil rounding (the attributes of the IR's pooling
ops), f32 or f64, on lp_pool.cl: the geometry goes to the kernel as a small constant buffer and
p as an argument, so one program serves every shape and p of an element type."""
from __future__ import annotations

import numpy as np

from ..base import Attr, register_op
from .._nn import AUTO_PADS, ROUNDING_TYPES, NamedOp, as_3d, spatial_rank, window_geometry
from .._program import global_1d, numel, program_text
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch


@register_op
class LpPool(NamedOp):
    input_count = (1, 1)
    type = "LpPool"
    attributes = (Attr("strides", "ints", required=True), Attr("pads_begin", "ints", required=True),
                  Attr("pads_end", "ints", required=True), Attr("kernel", "ints", required=True),
                  Attr("dilations", "ints", None), Attr("rounding_type", "str", "floor"),
                  Attr("auto_pad", "str", "explicit"), Attr("p", "int", 2))

    def check(self, attrs):
        self.check_choice(attrs, "auto_pad", AUTO_PADS)
        self.check_choice(attrs, "rounding_type", ROUNDING_TYPES)
        if attrs["p"] < 1:
            raise self.fail(attrs, f"attribute 'p'={attrs['p']} must be 1 or more")

    def _geometry(self, attrs, inputs) -> tuple[np.ndarray, tuple[int, ...]]:
        """(the kernel's constant buffer, the output shape)."""
        if inputs[0].dtype not in ("f32", "f64"):
            raise self.fail(attrs, f"input 0 is {inputs[0].dtype}; expected f32 or f64")
        x = tuple(inputs[0].shape)
        rank = spatial_rank(self, attrs, inputs[0], max_spatial=3)
        dilations = attrs.get("dilations") or (1,) * rank
        out, pads_begin, _ = window_geometry(self, attrs, x[2:], attrs["kernel"],
                                             attrs["strides"], dilations,
                                             attrs["rounding_type"].lower())
        g = [v for values, fill in ((x[2:], 1), (out, 1), (attrs["kernel"], 1),
                                    (attrs["strides"], 1), (dilations, 1), (pads_begin, 0))
             for v in as_3d(values, fill)]
        return np.array(g, np.int32), x[:2] + tuple(out)

    def infer_shapes(self, attrs, inputs, consts):
        return [(self._geometry(attrs, inputs)[1], inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        g, out = self._geometry(attrs, inputs)
        count = numel(out)
        src = program_text("lp_pool", {"T": inputs[0].cl_type}, "lp_pool.cl")
        return [KernelLaunch(src, "lp_pool", (Arg.input(0), Arg.output(0), Arg.const(g),
                                              Arg.scalar(np.int32(count)),
                                              Arg.scalar(np.int32(attrs["p"]))),
                             global_1d(count), label=f"lp_pool_p{attrs['p']}")]
