"""A per-channel affine map with an optional ReLU: out = max(x * scale[c] + bias[c], 0).

Not an op of any model format: passes/fusion.py makes it from a chain of per-channel constant
Multiply/Add layers (a BatchNormalization that follows a Concat, as in DenseNet) and the ReLU
after them, so the chain runs as one pass over memory instead of one per layer.
"""
from __future__ import annotations

import numpy as np

from ...jit.launch import Arg, KernelLaunch
from ...jit.layer import LayerCall, LayerImpl, LayerWork, Stage
from ...jit.tensor import TensorDesc
from .._program import defines, global_1d, items_per_work_item, numel, uint_arg

_SOURCE = """
__kernel void channel_affine(__global const float* restrict in, __global float* restrict out,
                             __global const float* restrict scale,
                             __global const float* restrict bias,
                             const uint count, const uint inner, const uint channels)
{
    const uint i = get_global_id(0);
    if (i >= count)
        return;
    const uint c = i / inner % channels;
    float v = mad(in[i], scale[c], bias[c]);
#if FUSED_RELU
    v = v < 0.0f ? 0.0f : v;          /* keeps a NaN, as ReLU does */
#endif
    out[i] = v;
}

/* CPU devices: a work item maps PER_ITEM consecutive elements of one channel's plane, with its
 * scale and bias loaded once: a loop LLVM vectorizes (the one-element items above divide per
 * element and left PoCL at a quarter of a float8 kernel's speed). NDRange: (ceil(INNER /
 * PER_ITEM), N * CHANNELS). */
__kernel void channel_affine_cpu(__global const float* restrict in, __global float* restrict out,
                                 __global const float* restrict scale,
                                 __global const float* restrict bias,
                                 const uint count, const uint inner, const uint channels)
{
    const uint plane = get_global_id(1), c = plane % channels;
    const uint first = get_global_id(0) * PER_ITEM;
    const float a = scale[c], b = bias[c];
    __global const float* x = in + plane * inner;
    __global float* y = out + plane * inner;
    const uint end = min(first + PER_ITEM, inner);
    for (uint i = first; i < end; ++i) {
        float v = mad(x[i], a, b);
#if FUSED_RELU
        v = v < 0.0f ? 0.0f : v;          /* keeps a NaN, as ReLU does */
#endif
        y[i] = v;
    }
}
"""


def channel_affine_launch(x: TensorDesc, relu: bool, per_item: int = 1) -> KernelLaunch:
    """Inputs: 0 the tensor (dense, f32, channels on axis 1), 1 the scales, 2 the biases.
    per_item > 1 (a CPU device: ops/_program.py items_per_work_item): channel_affine_cpu."""
    shape = tuple(x.shape)
    inner = numel(shape[2:])
    label = "channel_affine" + ("_relu" if relu else "")
    # sizes are arguments: one program per (relu, per_item) serves every shape
    source = defines(FUSED_RELU=int(relu), PER_ITEM=f"{per_item}u") + _SOURCE
    args = (Arg.input(0), Arg.output(0), Arg.input(1), Arg.input(2),
            uint_arg(numel(shape)), uint_arg(inner), uint_arg(shape[1]))
    if per_item > 1:
        return KernelLaunch(source=source, entry="channel_affine_cpu", args=args,
                            global_size=(-(-inner // per_item), numel(shape[:2])),
                            label=label + "_cpu")
    return KernelLaunch(source=source, entry="channel_affine", args=args,
                        global_size=global_1d(numel(shape)), label=label)


class ChannelAffine(LayerImpl):
    """The implementation the network compiler gives the head of a fused chain: input
    `data_port` of the head is the tensor; `chain` (passes/fusion.py's Epilogue) gives the
    per-channel scale and bias (`scale_and_bias(channels)`), `steps` and `relu`."""
    type = "ChannelAffine"

    def __init__(self, chain, data_port: int):
        self.chain = chain
        self.data_port = data_port

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        return [call.inputs[self.data_port].plain()]

    def work(self, call: LayerCall, outputs) -> LayerWork:
        x = call.inputs[self.data_port]
        scale, bias = self.chain.scale_and_bias(x.shape[1])
        consts = {"scale": scale.astype(np.float32), "bias": bias.astype(np.float32)}
        launch = channel_affine_launch(x, self.chain.relu, items_per_work_item(call.context))
        steps = self.chain.steps
        label = "+".join(["scale"] * any(k == "mul" for k, _ in steps)
                         + ["bias"] * any(k == "add" for k, _ in steps)
                         + ["relu"] * self.chain.relu)
        per_channel = TensorDesc((x.shape[1],))
        return LayerWork([Stage(call.name, f"ChannelAffine({label})", self.impl, launch.entry,
                                [launch], [("in", self.data_port), ("const", "scale"),
                                           ("const", "bias")], [("out", 0)],
                                [x, per_channel, per_channel], list(outputs))], consts=consts)
