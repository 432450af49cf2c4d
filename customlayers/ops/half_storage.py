"""float16 as a storage type: a built-in op on half tensors, on a device without cl_khr_fp16.

Without the extension OpenCL C still has `half` pointers and the core functions vload_half and
vstore_half (OpenCL C 1.2, 6.12.7), but no half arithmetic and no `half` values. So the op runs
on float32 copies: each half input is widened (vload_half, exact) into a float temporary, the
op's own kernels run in float32 (the call it sees has f32 where the model has f16, its constants
widened on the host), and each output the model holds in half is narrowed back (vstore_half_rte,
round to nearest even). Every op that computes in float thus computes half tensors as ONNX
Runtime's CPU kernels do (in float, rounded once per op), and ops that only move data move the
same bits.

Built-in ops take this path (LayerImpl.half_as_float) unless their kernels read half themselves
(LayerImpl.reads_half: the map kernels, through vload_half/vstore_half; Concat and Gather, which
move its bits as ushort: ops/_half_io.py); a custom layer's kernel is given the
types the contract names (SPEC section 3: half stays half), and its binding refuses a device
without the extension in its own words (runtime/layers/registry.check_half_support).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ..jit.launch import Arg, KernelLaunch
from ..jit.layer import LayerCall, LayerImpl, LayerWork, Stage
from ..jit.tensor import TensorDesc
from ._program import defines, global_1d, numel

HALF, FLOAT = "f16", "f32"
# the entries of the widening and narrowing kernels (compiler: they alone may touch half
# buffers on a device without cl_khr_fp16)
WIDEN, NARROW = "half_to_float", "float_to_half"
CONVERSION_ENTRIES = (WIDEN, NARROW)

# `half` appears only as a pointer type: no pragma, no half value (ops/_program.program_text
# would enable cl_khr_fp16 for a define naming half; these programs are written here instead)
_SOURCE = """
__kernel void half_to_float(__global const half* restrict in, __global float* restrict out)
{
    const uint i = get_global_id(0);
    if (i < COUNT)
        out[i] = vload_half(i, in);
}

__kernel void float_to_half(__global const float* restrict in, __global half* restrict out)
{
    const uint i = get_global_id(0);
    if (i < COUNT)
        vstore_half_rte(in[i], i, out);
}
"""


def touches_half(call: LayerCall) -> bool:
    """Whether the node has a half input or declares a half output."""
    return any(d.dtype == HALF for d in call.inputs) or \
        any(dtype == HALF for _, dtype in call.declared)


def _widened(desc: TensorDesc) -> TensorDesc:
    return replace(desc, dtype=FLOAT) if desc.dtype == HALF else desc


def float_descs(descs: Sequence[TensorDesc]) -> list[TensorDesc]:
    return [_widened(d) for d in descs]


def float_call(call: LayerCall) -> LayerCall:
    """The call the op sees: half inputs, constants and declared outputs as float32."""
    consts = {i: np.asarray(v).astype(np.float32) if np.asarray(v).dtype == np.float16 else v
              for i, v in call.consts.items()}
    declared = [(shape, FLOAT if dtype == HALF else dtype) for shape, dtype in call.declared]
    return replace(call, inputs=[_widened(d) for d in call.inputs], consts=consts,
                   declared=declared)


def half_outputs(impl: LayerImpl, call: LayerCall) -> list[TensorDesc]:
    """The node's outputs: the op's answer for the float call, held in half where the op makes
    half (Convert to f16), or makes float of what the model holds in half: the output the model
    declares f16, or, undeclared, the float output of a node whose float inputs were all half."""
    outs = impl.outputs(float_call(call))
    halves_in = any(d.dtype == HALF for d in call.inputs) and \
        not any(d.dtype == FLOAT for d in call.inputs)
    held = []
    for j, desc in enumerate(outs):
        declared = call.declared[j][1] if j < len(call.declared) else None
        if desc.dtype == HALF or (desc.dtype == FLOAT and (
                declared == HALF or (not declared and halves_in))):
            desc = replace(desc, dtype=HALF)
        held.append(desc)
    return held


def conversion_launch(entry: str, count: int, label: str) -> KernelLaunch:
    return KernelLaunch(source=f"// customlayers: {label}\n" + defines(COUNT=f"{count}u") +
                        _SOURCE, entry=entry, args=(Arg.input(0), Arg.output(0)),
                        global_size=global_1d(count), label=label)


def _conversion(call: LayerCall, entry: str, src_ref, dst_ref, src: TensorDesc,
                dst: TensorDesc) -> Stage:
    label = f"{entry} {list(src.shape)}"
    return Stage(call.name, f"{call.type}:{entry}", "reorder", entry,
                 [conversion_launch(entry, numel(src.shape), label)],
                 [src_ref], [dst_ref], [src], [dst])


def half_work(impl: LayerImpl, call: LayerCall, outputs: Sequence[TensorDesc]) -> LayerWork:
    """The op's work on float32 copies of the node's half tensors (module docstring)."""
    fcall = float_call(call)
    fouts = float_descs(outputs)
    work = impl.work(fcall, fouts)
    refs: dict = {}
    temps = dict(work.temps)
    before: list[Stage] = []
    after: list[Stage] = []
    for i, desc in enumerate(call.inputs):
        if desc.dtype == HALF:
            ref = refs[("in", i)] = ("temp", ("half_input", i))
            temps[ref[1]] = fcall.inputs[i]
            before.append(_conversion(call, WIDEN, ("in", i), ref, desc, fcall.inputs[i]))
    for j, desc in enumerate(outputs):
        if desc.dtype == HALF:
            ref = refs[("out", j)] = ("temp", ("half_output", j))
            temps[ref[1]] = fouts[j]
            after.append(_conversion(call, NARROW, ref, ("out", j), fouts[j], desc))
    stages = [replace(s, inputs=[refs.get(r, r) for r in s.inputs],
                      outputs=[refs.get(r, r) for r in s.outputs]) for s in work.stages]
    return replace(work, stages=before + stages + after, temps=temps)
