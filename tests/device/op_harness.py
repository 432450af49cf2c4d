"""Run one built-in op on the OpenCL device, and the same op on OpenVINO's CPU plugin.

`run_op` goes through the op's whole contract (parse_attributes, infer_shapes, launches) and
runs the launches with tests/launch_runner.py, so a test exercises exactly what the executor
would. Constant inputs are passed both as buffers and in `consts`, as the executor does.
"""
from __future__ import annotations
import pytest

from typing import Mapping, Sequence

import numpy as np

from customlayers.jit.launch import DEFAULT_CONTEXT, CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import run_launches
from oracle import run_compiled


CPU_CONTEXT = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096))


def run_op(cl_env, op_type: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, str] = None,
           const_inputs: Sequence[int] = (), layer: str = "test_layer",
           unbuffered_consts: Mapping[int, np.ndarray] = None,
           ctx: CompileContext = DEFAULT_CONTEXT) -> list[np.ndarray]:
    """`unbuffered_consts`: constant inputs that are given to the op but have no buffer (an
    empty array cannot be a tensor); they follow `inputs` in numbering. `ctx`: the compile
    context (CPU_CONTEXT: the kernels a CPU device gets)."""
    op = get_op(op_type)
    inputs = [np.asarray(a) for a in inputs]
    parsed = op.parse_attributes(dict(attrs or {}), layer)
    in_descs = [TensorDesc(a.shape, a.dtype) for a in inputs]
    consts = {i: inputs[i] for i in set(const_inputs) | set(op.const_inputs) if i < len(inputs)}
    consts.update(unbuffered_consts or {})
    specs = op.infer_shapes(parsed, in_descs, consts)
    out_descs = [TensorDesc(shape, dtype) for shape, dtype in specs]
    if op.is_view:
        assert op.launches(parsed, in_descs, out_descs, consts) == []
        return [inputs[0].reshape(out_descs[0].shape)]
    launches = op.launches(parsed, in_descs, out_descs, consts, ctx)
    return run_launches(cl_env, launches, inputs, in_descs, out_descs, shaped_for=ctx)


def run_openvino(build, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """`build(params)` makes the output node from opset13 Parameter nodes, one per input."""
    ov = pytest.importorskip("openvino")  # a test-only oracle
    ops = pytest.importorskip("openvino.opset13")
    params = [ops.parameter(list(a.shape), ov.Type(np.asarray(a).dtype)) for a in inputs]
    model = ov.Model([build(*params)], params)
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return run_compiled(compiled, list(inputs))[0]
