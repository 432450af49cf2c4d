"""GatherElements and GatherND (OpenVINO GatherElements-6 and GatherND-8, which are ONNX's):
indices computed at run time, negative ones counted from the end, an index still out of range
read as 0 (_launch.py); and Compress (ONNX) with its condition known when the plan is compiled
(a constant or a value input: the output's size is the condition's). Kernels:
index_gather.cl."""
from __future__ import annotations

import numpy as np

from ...jit.launch import Arg, DEFAULT_CONTEXT
from .._program import numel, shape_of
from ..base import Attr, Op, register_op
from ._launch import (axis_of, check_index_type, dense_strides, ints, launch, program, refuse,
                      scalar)


@register_op
class GatherElements(Op):
    """out[c] = data[c with c[axis] = indices[c]]; the indices have data's rank, and each dim
    at most data's (the output has the indices' shape)."""
    input_count = (2, 2)
    type = "GatherElements"
    attributes = (Attr("axis", "int", 0),)

    def _axis(self, attrs, inputs) -> int:
        data, idx = shape_of(inputs[0]), shape_of(inputs[1])
        check_index_type(self.type, attrs, inputs[1])
        if len(idx) != len(data):
            raise refuse(self.type, attrs, f"the indices {list(idx)} must have the rank of the "
                                           f"data {list(data)}")
        axis = axis_of(self.type, attrs, attrs["axis"], len(data))
        if any(i > d for k, (i, d) in enumerate(zip(idx, data)) if k != axis):
            raise refuse(self.type, attrs, f"the indices {list(idx)} are larger than the data "
                                           f"{list(data)} on an axis other than {axis}")
        return axis

    def infer_shapes(self, attrs, inputs, consts):
        self._axis(attrs, inputs)
        return [(shape_of(inputs[1]), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        axis = self._axis(attrs, inputs)
        data, out = shape_of(inputs[0]), shape_of(outputs[0])
        src = program("gather_elements", "index_gather.cl", data=inputs[0].cl_type,
                      idx=inputs[1].cl_type)
        count = numel(out)
        return [launch(src, "gather_elements",
                       (Arg.input(0), Arg.input(1), Arg.output(0),
                        ints(list(out) + dense_strides(data)), scalar(count), scalar(len(out)),
                        scalar(axis), scalar(data[axis])), count, "gather_elements")]


@register_op
class GatherND(Op):
    """GatherND-8 (ONNX GatherND-12/13): the last axis of the indices (m values) names data's
    axes batch_dims..batch_dims+m-1 within each batch; out = indices.shape[:-1] +
    data.shape[batch_dims+m:]."""
    input_count = (2, 2)
    type = "GatherND"
    attributes = (Attr("batch_dims", "int", 0),)

    def _geometry(self, attrs, inputs):
        data, idx = shape_of(inputs[0]), shape_of(inputs[1])
        check_index_type(self.type, attrs, inputs[1])
        b = attrs["batch_dims"]
        if not idx or not 0 <= b < min(len(idx), len(data)):
            raise refuse(self.type, attrs, f"batch_dims={b} does not fit data {list(data)} and "
                                           f"indices {list(idx)}")
        m = idx[-1]
        if data[:b] != idx[:b] or b + m > len(data) or m < 1:
            raise refuse(self.type, attrs, f"indices {list(idx)} do not fit data {list(data)} "
                                           f"with batch_dims={b} (the batch dims must be equal "
                                           f"and the last dim at most {len(data) - b})")
        return data, idx, b, m

    def infer_shapes(self, attrs, inputs, consts):
        data, idx, b, m = self._geometry(attrs, inputs)
        return [(idx[:-1] + data[b + m:], inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        data, idx, b, m = self._geometry(attrs, inputs)
        strides = dense_strides(data)
        count = numel(outputs[0].shape)
        src = program("gather_nd", "index_gather.cl", data=inputs[0].cl_type,
                      idx=inputs[1].cl_type)
        return [launch(src, "gather_nd",
                       (Arg.input(0), Arg.input(1), Arg.output(0),
                        ints(list(data[b:b + m]) + strides[b:b + m]), scalar(count),
                        scalar(numel(data[b + m:])), scalar(m), scalar(numel(idx[b:-1])),
                        scalar(numel(data[b:]))), count, "gather_nd")]


@register_op
class Compress(Op):
    """The slices along `axis` (absent: the elements of the flattened input) where the
    condition, the constant input 1 of at most the axis' length, is true."""
    input_count = (2, 2)
    type = "Compress"
    const_inputs = (1,)
    attributes = (Attr("axis", "int", None),)

    def _geometry(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        if 1 not in consts:
            raise refuse(self.type, attrs, "the condition (input 1) must be known when the "
                                           "network is compiled (a constant or a graph input)")
        if attrs["axis"] is None:
            outer, length, inner = 1, numel(shape), 1
        else:
            axis = axis_of(self.type, attrs, attrs["axis"], len(shape))
            outer, length, inner = numel(shape[:axis]), shape[axis], numel(shape[axis + 1:])
        condition = np.asarray(consts[1]).reshape(-1).astype(bool)
        if condition.size > length:
            raise refuse(self.type, attrs, f"the condition has {condition.size} values, more "
                                           f"than the {length} it selects from")
        picked = np.nonzero(condition)[0]
        return shape, (outer, length, inner), picked

    def infer_shapes(self, attrs, inputs, consts):
        shape, _, picked = self._geometry(attrs, inputs, consts)
        if attrs["axis"] is None:
            return [((picked.size,), inputs[0].dtype)]
        axis = axis_of(self.type, attrs, attrs["axis"], len(shape))
        return [(shape[:axis] + (picked.size,) + shape[axis + 1:], inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        _, (outer, length, inner), picked = self._geometry(attrs, inputs, consts)
        count = outer * picked.size * inner
        src = program("compress", "index_gather.cl", data=inputs[0].cl_type)
        return [launch(src, "gather_picked",
                       (Arg.input(0), Arg.output(0), ints(picked.tolist()), scalar(count),
                        scalar(inner), scalar(picked.size), scalar(length)), count,
                       "compress")]
