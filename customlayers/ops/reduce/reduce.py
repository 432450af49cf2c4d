"""ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd (opset1): axes from constant input
1, keep_dims. Sum, Max and Min also take the integer types (ONNX's int32, int64, uint32, uint64
and the narrower ones ONNX Runtime has no kernel for), computed in the type itself: a sum wraps.
The sizes and axes are a constant-buffer argument: one program per kind and element type."""
from __future__ import annotations

import numpy as np

from ..base import Attr, register_op
from .._nn import NamedOp, require_f32
from .._program import program_text
from ...dtypes import is_float
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch


class _Reduce(NamedOp):
    input_count = (2, 2)
    attributes = (Attr("keep_dims", "bool", False),)
    const_inputs = (1,)
    kind = ""
    takes_integers = True            # all but ReduceMean, which divides

    def _axes(self, attrs, inputs, consts) -> list[int]:
        if not self.takes_integers or is_float(inputs[0].dtype):
            require_f32(self, attrs, inputs[:1])
        rank = len(inputs[0].shape)
        if 1 not in consts:
            raise self.fail(attrs, "input 1 (axes) must be a constant")
        axes = set()
        for a in np.asarray(consts[1]).reshape(-1).tolist():
            a = int(a)
            if not -rank <= a < rank:
                raise self.fail(attrs, f"axis {a} is out of range for input 0 of shape "
                                       f"{list(inputs[0].shape)}")
            axes.add(a % rank)
        return sorted(axes)

    def infer_shapes(self, attrs, inputs, consts):
        axes = self._axes(attrs, inputs, consts)
        shape = inputs[0].shape
        if attrs["keep_dims"]:
            out = tuple(1 if i in axes else d for i, d in enumerate(shape))
        else:
            out = tuple(d for i, d in enumerate(shape) if i not in axes)
        return [(out, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        axes = self._axes(attrs, inputs, consts)
        d = inputs[0].dims  # logical dims padded with 1 at the end: same axis numbers
        r = [d[i] if i in axes else 1 for i in range(4)]
        count = 1
        for i in range(4):
            count *= d[i] // r[i]
        src = program_text("reduce", dict(
            REDUCE_MAX=int(self.kind == "max"), REDUCE_MIN=int(self.kind == "min"),
            REDUCE_MEAN=int(self.kind == "mean"), REDUCE_PROD=int(self.kind == "prod"),
            **({} if inputs[0].dtype == "f32" else {"DATA_T": inputs[0].cl_type})), "reduce.cl")
        geo = Arg.const(np.array([*d[:4], *r, count], np.int32))
        return [KernelLaunch(source=src, entry="reduce", args=(Arg.input(0), Arg.output(0), geo),
                             global_size=(count,),
                             label=f"reduce_{self.kind}_axes{''.join(map(str, axes))}")]

    def empty_input_outputs(self, call, outputs):
        """A reduction over an empty axis gives its identity (ONNX, ONNX Runtime): sum 0,
        prod 1, max the lowest value (-inf; False for bool), min the highest, mean 0 (not
        NaN: ONNX Runtime's)."""
        out = outputs[0]
        dtype = out.np_dtype
        if self.kind in ("sum", "prod", "mean"):
            value = 1 if self.kind == "prod" else 0     # mean: 0, as ONNX Runtime gives it
        elif dtype.kind == "f":
            value = -np.inf if self.kind == "max" else np.inf
        elif dtype.kind == "b" or call.attrs.get("boolean"):
            value = self.kind == "min"
        else:
            info = np.iinfo(dtype)
            value = info.min if self.kind == "max" else info.max
        return [np.full(out.shape, value, dtype)]


@register_op
class ReduceMean(_Reduce):
    type = "ReduceMean"
    kind = "mean"
    takes_integers = False


@register_op
class ReduceSum(_Reduce):
    type = "ReduceSum"
    kind = "sum"


@register_op
class ReduceMax(_Reduce):
    type = "ReduceMax"
    kind = "max"


@register_op
class ReduceMin(_Reduce):
    type = "ReduceMin"
    kind = "min"


@register_op
class ReduceProd(_Reduce):
    type = "ReduceProd"
    kind = "prod"
