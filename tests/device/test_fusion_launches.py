"""Fewer launches: a residual Add (and the ReLU after it) computed by the convolution that
produces one of its inputs, and MatMul + bias + ReLU as one kernel; each against OpenVINO."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import ov_infer, save_ov_model


def _conv(ops, x, rng, cin, cout, k=3):
    w = ops.constant((rng.standard_normal((cout, cin, k, k)) * 0.2).astype(np.float32))
    pad = [k // 2, k // 2]
    conv = ops.convolution(x, w, [1, 1], pad, pad, [1, 1])
    return ops.add(conv, ops.constant(rng.standard_normal((1, cout, 1, 1)).astype(np.float32)))


def _residual_block(path, shortcut_first: bool):
    """x -> conv+bias+relu -> conv+bias -> Add(shortcut) -> ReLU, the shortcut a 1x1 conv."""
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(11)
    x = ops.parameter([2, 8, 10, 12], np.float32, name="x")
    if shortcut_first:
        short = _conv(ops, x, rng, 8, 16, k=1)
    main = ops.relu(_conv(ops, x, rng, 8, 16))
    main = _conv(ops, main, rng, 16, 16)
    if not shortcut_first:
        short = _conv(ops, x, rng, 8, 16, k=1)
    y = ops.relu(ops.add(main, short) if shortcut_first else ops.add(short, main))
    y.output(0).get_tensor().set_names({"y"})
    return save_ov_model(ov.Model([y], [x], "res"), path / f"res{int(shortcut_first)}.xml")


@pytest.mark.parametrize("shortcut_first", [True, False])
def test_residual_add_and_relu_run_in_the_convolution(tmp_path, test_device, shortcut_first):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model = _residual_block(tmp_path, shortcut_first)
    x = np.random.default_rng(12).standard_normal((2, 8, 10, 12)).astype(np.float32)
    want = ov_infer(model, {"x": x})["y"]
    fused = Network(model, engine=Engine(test_device))
    types = [s.type for s in fused.plan.steps]
    # three convolutions, one of them ends with the residual Add and the ReLU: nothing else
    assert len(types) == 3 and sum(t.endswith("+bias+residual+relu") for t in types) == 1, types
    np.testing.assert_allclose(fused.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    plain = Network(model, engine=Engine(test_device), fuse=False)
    assert len(plain.plan.steps) == 9         # 3 convolutions, 3 biases, Add, 2 ReLUs
    np.testing.assert_allclose(plain.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_add_of_a_broadcast_tensor_is_not_a_residual(tmp_path, test_device):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(13)
    x = ops.parameter([1, 4, 6, 6], np.float32, name="x")
    s = ops.parameter([1, 4, 1, 6], np.float32, name="s")
    y = ops.relu(ops.add(_conv(ops, x, rng, 4, 4), s))
    y.output(0).get_tensor().set_names({"y"})
    model = save_ov_model(ov.Model([y], [x, s], "bcast"), tmp_path / "b.xml")
    arrays = {"x": rng.standard_normal((1, 4, 6, 6)).astype(np.float32),
              "s": rng.standard_normal((1, 4, 1, 6)).astype(np.float32)}
    net = Network(model, engine=Engine(test_device))
    assert not any("residual" in st.type for st in net.plan.steps)
    np.testing.assert_allclose(net.infer(arrays)["y"], ov_infer(model, arrays)["y"],
                               rtol=1e-4, atol=1e-4)


def test_onnx_gemm_with_bias_and_relu_is_one_kernel(tmp_path, test_device):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(14)
    w = (rng.standard_normal((30, 64)) * 0.1).astype(np.float32)
    b = rng.standard_normal((30,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
         helper.make_node("Relu", ["g"], ["y"])], "fc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 30])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = tmp_path / "fc.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    net = Network(path, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["MatMul+bias+relu"]
    np.testing.assert_allclose(net.infer({"x": x})["y"], np.maximum(x @ w.T + b, 0),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bias_shape", [(24,), (1, 1, 24)])
def test_a_transformer_linear_with_bias_and_residual_is_one_kernel(tmp_path, test_device,
                                                                   bias_shape):
    # MatMul [B, S, K] x [K, N], the bias along the last axis, the residual Add: one launch
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(15)
    w = (rng.standard_normal((16, 24)) * 0.2).astype(np.float32)
    b = rng.standard_normal(bias_shape).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Add", ["a", "r"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, 16]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 7, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 24])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = tmp_path / "linear.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    r = rng.standard_normal((2, 7, 24)).astype(np.float32)
    net = Network(path, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["MatMul+bias+residual"]
    np.testing.assert_allclose(net.infer({"x": x, "r": r})["y"], x @ w + b.reshape(-1) + r,
                               rtol=1e-4, atol=1e-4)


def test_a_bias_along_axis_1_of_a_3d_matmul_stays_a_layer(tmp_path, test_device):
    # the channels of a MatMul's [B, S, N] output are its last axis: a (1, S, 1) Add is not
    # its bias, and stays a layer of its own
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(16)
    w = rng.standard_normal((16, 24)).astype(np.float32)
    b = rng.standard_normal((1, 7, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 24])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = tmp_path / "rows.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    net = Network(path, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["MatMul", "Add"]
    np.testing.assert_allclose(net.infer({"x": x})["y"], x @ w + b, rtol=1e-4, atol=1e-4)


def _onnx_model(tmp_path, nodes, inputs, outputs, inits, name):
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_causal_slice_after_a_conv1d_is_its_padding(tmp_path, test_device):
    """The TCN's block: Conv1d with padding (k-1)*d on both sides, the right part chopped off
    by a Slice, then ReLU: one kernel."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(15)
    k, d, c = 7, 4, 6
    p = (k - 1) * d
    w = (rng.standard_normal((c, 3, k)) * 0.3).astype(np.float32)
    b = rng.standard_normal((c,)).astype(np.float32)
    const = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    model = _onnx_model(tmp_path, [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[p, p], dilations=[d],
                         kernel_shape=[k]),
        helper.make_node("Slice", ["c", "s0", "s1", "ax", "st"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 50])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 50])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         const([0], "s0"), const([-p], "s1"), const([2], "ax"), const([1], "st")], "tcn")
    x = rng.standard_normal((2, 3, 50)).astype(np.float32)
    want = ov_infer(model, {"x": x})["y"]
    net = Network(model, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["Convolution+bias+relu"]
    assert any(m.startswith("folded the causal Slice") for m in net.messages)
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    plain = Network(model, engine=Engine(test_device), fuse=False)
    np.testing.assert_allclose(plain.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pad_value", [0.0, 1.5])
def test_zero_pad_before_a_convolution_is_its_padding(tmp_path, test_device, pad_value):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(16)
    w = (rng.standard_normal((5, 4, 3, 3)) * 0.3).astype(np.float32)
    model = _onnx_model(tmp_path, [
        helper.make_node("Pad", ["x", "pads", "v"], ["p"]),
        helper.make_node("Conv", ["p", "w"], ["y"], pads=[1, 0, 1, 0], strides=[2, 1])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array([0, 0, 2, 1, 0, 0, 0, 3], np.int64), "pads"),
         numpy_helper.from_array(np.array(pad_value, np.float32), "v")], f"pad{pad_value}")
    x = rng.standard_normal((1, 4, 9, 8)).astype(np.float32)
    want = ov_infer(model, {"x": x})["y"]
    net = Network(model, engine=Engine(test_device))
    folded = [s.type for s in net.plan.steps] == ["Convolution"]
    assert folded == (pad_value == 0.0)        # only a zero Pad is the convolution's padding
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("declared", [None, ["N", 5, "T"]])
def test_a_tcn_block_is_two_kernels(tmp_path, test_device, declared):
    """Two causal conv+chomp+ReLU, the residual Add and the last ReLU (the seed's TCN block):
    the second convolution applies bias, ReLU, residual and ReLU where it stores; also where
    the model leaves its batch and length open (torch's export with dynamic axes): the
    fusions are decided on each plan's shapes. A GPU would make the whole block one
    TemporalBlocks launch (test_tcn_block_fusion.py); that rewrite is off here so that both
    kinds of device check the convolutions' own epilogues."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(17)
    k, d, c, length = 7, 2, 5, 40
    p = (k - 1) * d
    const = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    inits = [const([0], "s0"), const([-p], "s1"), const([2], "ax"), const([1], "st")]
    nodes = []
    for i in (1, 2):
        inits += [numpy_helper.from_array((rng.standard_normal((c, c, k)) * 0.3)
                                          .astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal((c,)).astype(np.float32), f"b{i}")]
        src = "x" if i == 1 else "r1"
        nodes += [helper.make_node("Conv", [src, f"w{i}", f"b{i}"], [f"c{i}"], pads=[p, p],
                                   dilations=[d], kernel_shape=[k]),
                  helper.make_node("Slice", [f"c{i}", "s0", "s1", "ax", "st"], [f"sl{i}"]),
                  helper.make_node("Relu", [f"sl{i}"], [f"r{i}"])]
    nodes += [helper.make_node("Add", ["r2", "x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    shape = declared or [3, c, length]
    model = _onnx_model(tmp_path, nodes,
                        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                        inits, "block")
    net = Network(model, engine=Engine(test_device), fuse_temporal_blocks=False)
    for batch, steps in ((3, length), (2, 23)) if declared else ((3, length),):
        x = rng.standard_normal((batch, c, steps)).astype(np.float32)
        assert [s.type for s in net.plan_for({"x": x.shape}).steps] == [
            "Convolution+bias+relu", "Convolution+bias+relu+residual+relu"]
        np.testing.assert_allclose(net.infer({"x": x})["y"], ov_infer(model, {"x": x})["y"],
                                   rtol=1e-4, atol=1e-4)


def _shuffle_then_depthwise(tmp_path, onnx_pattern: bool, extra_reader: bool = False):
    """x -> 1x1 conv (16 channels) -> channel shuffle (group 4) -> depthwise 3x3 conv + bias:
    ShuffleNet's unit. The shuffle is ShuffleChannels (IR) or Reshape/Transpose/Reshape
    (ONNX). extra_reader: a second consumer reads the shuffled tensor too."""
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(21)
    x = ops.parameter([1, 8, 9, 11], np.float32, name="x")
    c = ops.convolution(x, ops.constant(rng.standard_normal((16, 8, 1, 1)).astype(np.float32)),
                        [1, 1], [0, 0], [0, 0], [1, 1])
    if onnx_pattern:
        split = ops.reshape(c, ops.constant(np.array([1, 4, 4, 9, 11], np.int64)), False)
        swapped = ops.transpose(split, ops.constant(np.array([0, 2, 1, 3, 4], np.int64)))
        shuffled = ops.reshape(swapped, ops.constant(np.array([1, 16, 9, 11], np.int64)), False)
    else:
        shuffled = ops.shuffle_channels(c, 1, 4)
    w = ops.constant(rng.standard_normal((16, 1, 1, 3, 3)).astype(np.float32))
    dw = ops.group_convolution(shuffled, w, [2, 2], [1, 1], [1, 1], [1, 1])
    y = ops.add(dw, ops.constant(rng.standard_normal((1, 16, 1, 1)).astype(np.float32)))
    y.output(0).get_tensor().set_names({"y"})
    outputs = [y]
    if extra_reader:
        z = ops.relu(shuffled)
        z.output(0).get_tensor().set_names({"z"})
        outputs.append(z)
    name = f"shuffle{int(onnx_pattern)}{int(extra_reader)}"
    return save_ov_model(ov.Model(outputs, [x], name), tmp_path / f"{name}.xml")


@pytest.mark.parametrize("onnx_pattern", [False, True], ids=["ShuffleChannels", "reshapes"])
def test_channel_shuffle_is_folded_into_the_depthwise_convolution(tmp_path, test_device,
                                                                   onnx_pattern):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model = _shuffle_then_depthwise(tmp_path, onnx_pattern)
    x = np.random.default_rng(22).standard_normal((1, 8, 9, 11)).astype(np.float32)
    want = ov_infer(model, {"x": x})["y"]
    net = Network(model, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["Convolution", "GroupConvolution+bias"]
    assert any(m.startswith("folded the channel shuffle") for m in net.messages)
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_channel_shuffle_read_twice_is_kept(tmp_path, test_device):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model = _shuffle_then_depthwise(tmp_path, False, extra_reader=True)
    x = np.random.default_rng(23).standard_normal((1, 8, 9, 11)).astype(np.float32)
    want = ov_infer(model, {"x": x})
    net = Network(model, engine=Engine(test_device))
    assert "ShuffleChannels" in [s.type for s in net.plan.steps]
    got = net.infer({"x": x})
    for name in ("y", "z"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("indices_read", [False, True])
def test_unread_maxpool_indices_are_not_computed(tmp_path, test_device, indices_read):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset8")
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    x = ops.parameter([1, 3, 20, 37], np.float32, name="x")
    pool = ops.max_pool(x, [2, 2], [1, 1], [1, 1], [1, 1], [3, 3], "floor", "explicit", "i64")
    pool.output(0).get_tensor().set_names({"y"})
    outputs = [pool.output(0)]
    if indices_read:
        pool.output(1).get_tensor().set_names({"i"})
        outputs.append(pool.output(1))
    model = save_ov_model(ov.Model(outputs, [x], "pool"), tmp_path / f"p{int(indices_read)}.xml")
    arr = np.random.default_rng(24).standard_normal((1, 3, 20, 37)).astype(np.float32)
    want = ov_infer(model, {"x": arr})
    net = Network(model, engine=Engine(test_device))
    dropped = any("index output is read by no layer" in m for m in net.messages)
    assert dropped != indices_read
    got = net.infer({"x": arr})
    np.testing.assert_array_equal(got["y"], want["y"])
    if indices_read:
        np.testing.assert_array_equal(got["i"], want["i"])


def _last_step_head(tmp_path, batch, index, extra_output=False, axis=2, declared=None):
    """x (batch, 25, 30) -> Gather(index, axis 2) -> Gemm(transB, bias) -> LogSoftmax: the head
    of the TCN and of many sequence classifiers ("the last time step"); declared: x's shape as
    the model declares it (open dimensions as names), else the data's."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(16)
    w = (rng.standard_normal((10, 25)) * 0.3).astype(np.float32)
    b = rng.standard_normal((10,)).astype(np.float32)
    shape = [batch, 25, 30] if axis == 2 else [batch, 30, 25]
    picked = shape[:axis] + shape[axis + 1:]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                             [(declared or shape)[0], 10])]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("last", TensorProto.FLOAT, picked))
    model = _onnx_model(tmp_path, [
        helper.make_node("Gather", ["x", "i"], ["last"], axis=axis),
        helper.make_node("Gemm", ["last", "w", "b"], ["fc"], transB=1),
        helper.make_node("LogSoftmax", ["fc"], ["y"], axis=1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, declared or shape)], outputs,
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.array(index, np.int64), "i")], f"head{batch}")
    x = rng.standard_normal(shape).astype(np.float32)
    fc = np.take(x, index, axis=axis).astype(np.float64) @ w.T + b
    want = fc - fc.max(axis=1, keepdims=True)
    want -= np.log(np.exp(want).sum(axis=1, keepdims=True))
    return model, x, want


@pytest.mark.parametrize("batch,index", [(1, -1), (3, 29), (4, 7)])
def test_last_step_gather_is_read_by_the_matmul(tmp_path, test_device, batch, index):
    """The Gather is no launch of its own: the MatMul reads element `index` of x's last axis;
    and the LogSoftmax is applied to each row of the MatMul's output in the same kernel: the
    whole head is one launch."""
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model, x, want = _last_step_head(tmp_path, batch, index)
    net = Network(model, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["MatMul+bias+logsoftmax"]
    assert any(m.startswith("folded Gather") for m in net.messages)
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("declared", [["N", 25, 30], ["N", 25, "T"]])
def test_last_step_gather_of_an_open_batch_or_length_is_read_by_the_matmul(
        tmp_path, test_device, declared):
    """A model that leaves its batch (or its length) open folds its head all the same: every
    request's plan reads x in the MatMul and applies the LogSoftmax in its kernel, at batch 3
    and 1: one launch."""
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model, x, want = _last_step_head(tmp_path, 3, -1, declared=declared)
    net = Network(model, engine=Engine(test_device))
    assert any(m.startswith("folded Gather") for m in net.messages)
    for batch in (3, 1):
        shape = (batch, 25, 30)
        assert [s.type for s in net.plan_for({"x": shape}).steps] == ["MatMul+bias+logsoftmax"]
        np.testing.assert_allclose(net.infer({"x": x[:batch]})["y"], want[:batch], rtol=1e-5,
                                   atol=1e-5)


def _gather_head(tmp_path, index, declared, extra_output):
    """x -> Gather(constant index, last axis) -> MatMul, the Gather also an output or not."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = np.ones((25, 10), np.float32)
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [declared[0], 10])]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("last", TensorProto.FLOAT, declared[:2]))
    return _onnx_model(tmp_path, [
        helper.make_node("Gather", ["x", "i"], ["last"], axis=2, name="pick_last"),
        helper.make_node("MatMul", ["last", "w"], ["y"], name="fc")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, declared)], outputs,
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(index, np.int64),
                                                                   "i")], f"gather{index}")


@pytest.mark.parametrize("index", [30, -31])
@pytest.mark.parametrize("declared,extra_output", [([2, 25, 30], True), (["N", 25, "T"], False),
                                                   (["N", 25, "T"], True)])
def test_a_constant_gather_index_out_of_range_is_refused_naming_the_gather(
        tmp_path, test_device, index, declared, extra_output):
    """ONNX calls it an error (ONNX Runtime refuses it); the kernel would read 0 there. Kept as
    a layer or folded into the MatMul's reads, the plan for a length of 30 is refused with the
    index, the length and (folded) the Gather's name; never a silent zero."""
    from customlayers.errors import CustomLayersError
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model = _gather_head(tmp_path, index, declared, extra_output)
    x = np.ones((2, 25, 30), np.float32)
    with pytest.raises(CustomLayersError) as caught:
        Network(model, engine=Engine(test_device)).infer({"x": x})
    text = str(caught.value)
    assert f"index {index}" in text and "out of range" in text and "30" in text, text
    assert "pick_last" in text, text


@pytest.mark.parametrize("extra_output,axis", [(True, 2), (False, 1)])
def test_gather_read_elsewhere_or_of_another_axis_is_kept(tmp_path, test_device,
                                                          extra_output, axis):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model, x, want = _last_step_head(tmp_path, 2, 3, extra_output, axis)
    net = Network(model, engine=Engine(test_device))
    assert not any("of the last axis) into the reads" in m for m in net.messages)  # no pick
    if extra_output:            # read elsewhere: the Gather stays
        assert [s.type for s in net.plan.steps] == ["Gather", "MatMul+bias+logsoftmax"]
    else:                       # of a middle axis: a strided view the MatMul reads
        assert [s.type for s in net.plan.steps] == ["MatMul+bias+logsoftmax"]
        assert any(m.startswith("folded Gather") and "into the reads of MatMul" in m
                   for m in net.messages)
    got = net.infer({"x": x})
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    if extra_output:
        np.testing.assert_array_equal(got["last"], np.take(x, 3, axis=axis))


def _linear_then(tmp_path, kind, axis, relu=False, rows=(15,), width=200):
    """x rows x 300 -> MatMul (300 x width: 200 makes a row span several passes of a
    work-group) + bias (+ ReLU) -> Softmax or LogSoftmax of `axis`."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(17)
    w = (rng.standard_normal((300, width)) * 0.1).astype(np.float32)
    b = rng.standard_normal((width,)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["fc"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["fc"], ["fr"]))
    nodes.append(helper.make_node(kind, ["fr" if relu else "fc"], ["y"], axis=axis))
    model = _onnx_model(tmp_path, nodes,
                        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(rows) + [300])],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                       list(rows) + [width])],
                        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
                        f"{kind}{axis}")
    x = rng.standard_normal(tuple(rows) + (300,)).astype(np.float32)
    fc = x.astype(np.float64) @ w + b
    fc = np.maximum(fc, 0) if relu else fc
    shifted = fc - fc.max(axis=axis, keepdims=True)
    logsum = np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    want = shifted - logsum if kind == "LogSoftmax" else np.exp(shifted - logsum)
    return model, x, want


@pytest.mark.parametrize("kind,relu", [("LogSoftmax", False), ("Softmax", False),
                                       ("Softmax", True)])
def test_softmax_of_the_last_axis_runs_in_the_matmul(tmp_path, test_device, kind, relu):
    """A classifier's head (Linear, bias, (ReLU,) Softmax or LogSoftmax) is one kernel, over a
    batch of 15 rows of 200 classes, against float64 numpy."""
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model, x, want = _linear_then(tmp_path, kind, -1, relu)
    net = Network(model, engine=Engine(test_device))
    fused = "MatMul+bias" + ("+relu" if relu else "") + "+" + kind.lower()
    assert [s.type for s in net.plan.steps] == [fused]
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def test_softmax_of_another_axis_stays_a_layer(tmp_path, test_device):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model, x, want = _linear_then(tmp_path, "Softmax", 0)     # across the rows
    net = Network(model, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["MatMul+bias", "SoftMax"]
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def test_a_large_head_keeps_its_softmax_apart(tmp_path, test_device):
    """300 x 300 weights (over ops/nn/matmul.py's ROW_SOFTMAX_MAX_WEIGHTS): one work-group per row
    would be slower than the matrix-vector kernel, so the SoftMax stays a layer."""
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model, x, want = _linear_then(tmp_path, "Softmax", -1, width=300)
    net = Network(model, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["MatMul+bias", "SoftMax"]
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def test_a_folded_negative_index_counts_from_the_length_given_at_load(tmp_path, test_device):
    """The model declares 30 steps; loaded for 40, index -1 is step 39, as the Gather itself
    would read it (the fold keeps the index as written, not the declared 29)."""
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model, _, _ = _last_step_head(tmp_path, 2, -1)
    rng = np.random.default_rng(18)
    x = rng.standard_normal((2, 25, 40)).astype(np.float32)
    net = Network(model, engine=Engine(test_device), input_shapes={"x": (2, 25, 40)})
    plain = Network(model, engine=Engine(test_device), input_shapes={"x": (2, 25, 40)},
                    fuse=False)
    assert any(m.startswith("folded Gather") for m in net.messages)
    np.testing.assert_allclose(net.infer({"x": x})["y"], plain.infer({"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


def test_softmax_over_m_or_after_a_read_output_stays_a_layer(tmp_path, test_device):
    """A 1-D B makes the output's last axis M (no row of N to reduce); a MatMul whose output
    is also a network output must store it before any SoftMax."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    rng = np.random.default_rng(19)
    w = rng.standard_normal((5,)).astype(np.float32)
    w2 = rng.standard_normal((5, 7)).astype(np.float32)
    f = lambda *s: helper.make_tensor_value_info(s[0], TensorProto.FLOAT, list(s[1:]))  # noqa
    model = _onnx_model(tmp_path, [
        helper.make_node("MatMul", ["x", "w"], ["mv"]),
        helper.make_node("Softmax", ["mv"], ["y"], axis=-1),
        helper.make_node("MatMul", ["x", "w2"], ["mm"]),
        helper.make_node("Softmax", ["mm"], ["z"], axis=-1)],
        [f("x", 2, 3, 5)], [f("y", 2, 3), f("z", 2, 3, 7), f("mm", 2, 3, 7)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2")], "heads")
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    net = Network(model, engine=Engine(test_device))
    assert sorted(s.type for s in net.plan.steps) == ["MatMul", "MatMul", "SoftMax", "SoftMax"]
    got = net.infer({"x": x})

    def softmax(v):
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(got["y"], softmax(x.astype(np.float64) @ w), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(got["mm"], x.astype(np.float64) @ w2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["z"], softmax(x.astype(np.float64) @ w2), rtol=1e-5,
                               atol=1e-6)
