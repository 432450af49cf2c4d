"""One program per op and variant, not per shape (issue 22): the convolutions and MatMuls of a
network, of different channels, planes, strides, pads and dilations, share their programs (the
sizes are kernel arguments), and still compute what OpenVINO computes."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import ov_infer, save_ov_model

_CONV_ENTRIES = ("conv", "gemm_", "winograd")


def _programs(net, prefixes) -> set:
    # (the CPU convolution's zero-padded copy is a program of its own: conv_cpu_pad.cl, one
    # for every convolution, counted apart)
    return {(launch.source, launch.options) for step in net.plan.steps
            for launch in step.launches
            if launch.entry.startswith(prefixes) and launch.entry != "conv_cpu_pad"}


def _conv_chain(path):
    """Three 3x3 convolutions (+ bias + ReLU) of different sizes, strides, pads and dilations,
    then two MatMuls of different sizes."""
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(21)
    x = ops.parameter([1, 16, 10, 12], np.float32, name="x")
    y = x
    # output channels of one tile class: on AVX-512 more than 16 per group take the 32-channel
    # float16 tile (16 or fewer the 16-channel one, another variant and program by design)
    for cin, cout, stride, pad, dilation in ((16, 24, 1, 1, 1), (24, 32, 2, 1, 1),
                                             (32, 24, 1, 2, 2)):
        w = ops.constant((rng.standard_normal((cout, cin, 3, 3)) * 0.2).astype(np.float32))
        conv = ops.convolution(y, w, [stride] * 2, [pad] * 2, [pad] * 2, [dilation] * 2)
        bias = ops.constant(rng.standard_normal((1, cout, 1, 1)).astype(np.float32))
        y = ops.relu(ops.add(conv, bias))
    y = ops.reshape(y, ops.constant(np.array([24, 30], np.int64)), False)    # 24 x (5 x 6)
    for k, n in ((30, 24), (24, 8)):
        y = ops.matmul(y, ops.constant(rng.standard_normal((k, n)).astype(np.float32)),
                       False, False)
    y.output(0).get_tensor().set_names({"y"})
    return save_ov_model(ov.Model([y], [x], "chain"), path / "chain.xml")


def test_convolutions_and_matmuls_of_different_shapes_share_programs(tmp_path, test_device):
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.device.device import Engine
    model = _conv_chain(tmp_path)
    x = np.random.default_rng(22).standard_normal((1, 16, 10, 12)).astype(np.float32)
    net = Network(model, engine=Engine(test_device), tuning="off")
    assert sum(s.type.startswith("Convolution") for s in net.plan.steps) == 3
    assert len(_programs(net, _CONV_ENTRIES)) == 1
    assert len({(launch.source, launch.options) for step in net.plan.steps
                for launch in step.launches if launch.entry == "conv_cpu_pad"}) <= 1
    assert sum(s.type.startswith("MatMul") for s in net.plan.steps) == 2
    assert len(_programs(net, ("matmul",))) == 1
    want = ov_infer(model, {"x": x})["y"]
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-3)
