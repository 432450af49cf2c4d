"""Issue 20 item 4: GridSample (opset 16, 20), RoiAlign (opset 10, 16) against ONNX Runtime and
onnx's reference evaluator, and NonMaxSuppression's refusal at load."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from customlayers.errors import BindingError, ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.runtime.compile.network import Network  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(16)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, node, inputs: dict, opset: int) -> Path:
    infos = [helper.make_tensor_value_info(
        name, TensorProto.INT64 if value.dtype == np.int64 else F, list(value.shape))
        for name, value in inputs.items()]
    graph = helper.make_graph([node], "g", infos, [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _check(engine, path: Path, feeds: dict, reference: bool = True, rtol=1e-4, atol=1e-5):
    got = Network(read_onnx(path), engine=engine).infer(feeds)["y"]
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    if reference:
        np.testing.assert_allclose(got, ReferenceEvaluator(str(path)).run(None, feeds)[0],
                                   rtol=rtol, atol=atol)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(tmp_path, engine, mode, padding, align):
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = RNG.uniform(-1.4, 1.4, (2, 4, 6, 2)).astype(np.float32)   # some points outside
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=align)
    path = _model(tmp_path / "gs.onnx", node, {"x": x, "grid": grid}, 20)
    # cubic with border padding: the reference clamps the coordinate before it takes the four
    # taps, PyTorch and ONNX Runtime clamp each tap; models come from PyTorch, so we follow it
    _check(engine, path, {"x": x, "grid": grid},
           reference=not (mode == "cubic" and padding == "border"))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_opset_16_names(tmp_path, engine, mode):
    x = RNG.standard_normal((1, 2, 6, 4)).astype(np.float32)
    grid = RNG.uniform(-1.1, 1.1, (1, 3, 5, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                            padding_mode="border")
    path = _model(tmp_path / "gs.onnx", node, {"x": x, "grid": grid}, 16)
    _check(engine, path, {"x": x, "grid": grid}, reference=False)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "reflection"])
def test_grid_sample_volumetric(tmp_path, engine, mode, padding):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.2, 1.2, (1, 2, 3, 4, 3)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding)
    path = _model(tmp_path / "gs.onnx", node, {"x": x, "grid": grid}, 20)
    _check(engine, path, {"x": x, "grid": grid})


def _rois(count: int, size: float) -> np.ndarray:
    corners = RNG.uniform(-1, size, (count, 2, 2))
    return np.concatenate([corners.min(1), corners.max(1)], axis=1).astype(np.float32)


@pytest.mark.parametrize("opset,attrs", [
    (16, {"coordinate_transformation_mode": "half_pixel", "sampling_ratio": 2}),
    (16, {"coordinate_transformation_mode": "output_half_pixel", "sampling_ratio": 0}),
    (16, {"mode": "max", "sampling_ratio": 3, "spatial_scale": 0.5}),
    (10, {"output_height": 3, "output_width": 4, "sampling_ratio": 0, "spatial_scale": 0.25}),
])
def test_roi_align(tmp_path, engine, opset, attrs):
    x = RNG.standard_normal((2, 3, 12, 10)).astype(np.float32)
    scale = attrs.get("spatial_scale", 1.0)
    feeds = {"x": x, "rois": _rois(5, 11 / scale),
             "batch_indices": np.array([0, 1, 1, 0, 1], np.int64)}
    attrs = {"output_height": 4, "output_width": 3, **attrs}
    node = helper.make_node("RoiAlign", ["x", "rois", "batch_indices"], ["y"], **attrs)
    path = _model(tmp_path / "roi.onnx", node, feeds, opset)
    _check(engine, path, feeds, reference=opset >= 16)


def test_non_max_suppression_is_refused_with_why(tmp_path):
    inputs = {"boxes": np.zeros((1, 6, 4), np.float32), "scores": np.zeros((1, 1, 6), np.float32)}
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["y"], name="nms")
    path = _model(tmp_path / "nms.onnx", node, inputs, 11)
    with pytest.raises(ModelError) as info:
        Network(read_onnx(path))
    message = str(info.value)
    assert "'nms' (NonMaxSuppression): the ONNX op NonMaxSuppression has no translation" \
        in message
    assert "depends on the values of the boxes and scores" in message
    assert "run it as your own layer" in message     # a user's NMS layer still binds to it


def _value_model(path: Path, node, data: dict, values: dict, opset: int) -> Path:
    """A model whose `values` (shape-like int64 operands) are graph inputs, as in the node
    suite."""
    return _model(path, node, {**data, **values}, opset)


@pytest.mark.parametrize("size,align", [((2, 3, 5, 7), 0), ((2, 3, 5, 7), 1),
                                        ((1, 2, 3, 4, 5), 0), ((1, 2, 3, 4, 5), 1)])
def test_affine_grid(tmp_path, engine, size, align):
    s = len(size) - 2
    theta = RNG.standard_normal((size[0], s, s + 1)).astype(np.float32)
    node = helper.make_node("AffineGrid", ["theta", "size"], ["y"], align_corners=align)
    feeds = {"theta": theta, "size": np.array(size, np.int64)}
    path = _value_model(tmp_path / "ag.onnx", node, {"theta": theta},
                        {"size": feeds["size"]}, 20)
    _check(engine, path, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("image,block,attrs", [
    ((6, 7), (2, 3), {}),
    ((9, 8), (3, 2), {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}),
    ((3, 4, 5), (2, 2, 3), {"strides": [1, 2, 1]}),
])
def test_col2im(tmp_path, engine, image, block, attrs):
    s = len(image)
    strides = attrs.get("strides", [1] * s)
    dil = attrs.get("dilations", [1] * s)
    pads = attrs.get("pads", [0] * 2 * s)
    blocks = [(image[a] + pads[a] + pads[s + a] - dil[a] * (block[a] - 1) - 1) // strides[a] + 1
              for a in range(s)]
    x = RNG.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(blocks)))).astype(
        np.float32)
    node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], **attrs)
    values = {"image_shape": np.array(image, np.int64), "block_shape": np.array(block, np.int64)}
    path = _value_model(tmp_path / "c2i.onnx", node, {"x": x}, values, 18)
    _check(engine, path, {"x": x, **values}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,target,axes", [
    ((7, 10, 3), (4, 13, 3), None),           # crop one axis, pad another (odd differences)
    ((3, 9, 8), (5, 11), [1, 2]),
    ((9, 8, 3), (4, 12), [-3, -2]),
])
def test_center_crop_pad(tmp_path, engine, shape, target, axes):
    x = RNG.standard_normal(shape).astype(np.float32)
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"],
                            **({"axes": axes} if axes else {}))
    values = {"shape": np.array(target, np.int64)}
    path = _value_model(tmp_path / "ccp.onnx", node, {"x": x}, values, 18)
    _check(engine, path, {"x": x, **values}, rtol=0, atol=0)


def test_bad_geometry_is_refused_naming_the_node(tmp_path):
    x = np.zeros((1, 4, 7), np.float32)                   # 7 columns: 2x2 blocks of 4x4 need 9
    node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], name="fold")
    inits = {"image_shape": np.array([4, 4], np.int64), "block_shape": np.array([2, 2], np.int64)}
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, x.shape)],
                              [helper.make_tensor_value_info("y", F, None)],
                              [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "bad.onnx"))
    with pytest.raises(BindingError) as info:
        Network(read_onnx(tmp_path / "bad.onnx"))
    assert "'fold' (Col2Im)" in str(info.value)
    assert "must be N, C*4 (the block [2, 2]), 9 (the blocks [3, 3]" in str(info.value)


def test_size_computed_at_run_time_is_refused(tmp_path):
    nodes = [helper.make_node("Abs", ["s"], ["s2"]),
             helper.make_node("AffineGrid", ["theta", "s2"], ["y"], name="grid")]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("theta", F, [1, 2, 3]),
        helper.make_tensor_value_info("s", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "bad.onnx"))
    with pytest.raises(ModelError) as info:
        Network(read_onnx(tmp_path / "bad.onnx"))
    assert "'grid' (AffineGrid)" in str(info.value)
    assert "size (input 1, 's2') must be a constant or a graph input" in str(info.value)
