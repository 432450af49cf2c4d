"""Issue 20 item 4: a YOLO-style detector head built with onnx.helper (as a YOLOv5/v8 export
lays it out: SiLU as x * Sigmoid(x), an SPPF block of three chained MaxPools and a Concat, FPN
upsampling by Resize nearest, a grid decode with Sigmoid, Mul, Add, Pow and Concat) runs and
matches ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.runtime.compile.network import Network  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(5)
CLASSES, ANCHORS = 3, 2
OUT = 5 + CLASSES


class _Builder:
    def __init__(self):
        self.nodes, self.inits = [], []

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, inputs, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv_silu(self, x, cin, cout, k, stride, name):
        w = self.const(f"{name}.w", (RNG.standard_normal((cout, cin, k, k)) /
                                     np.sqrt(cin * k * k)).astype(np.float32))
        b = self.const(f"{name}.b", (RNG.standard_normal(cout) * 0.1).astype(np.float32))
        y = self.node("Conv", [x, w, b], f"{name}.conv", kernel_shape=[k, k],
                      strides=[stride, stride], pads=[k // 2] * 4)
        s = self.node("Sigmoid", [y], f"{name}.sig")
        return self.node("Mul", [y, s], f"{name}.silu")

    def sppf(self, x, c, name):
        h = self.conv_silu(x, c, c // 2, 1, 1, f"{name}.cv1")
        pools = [h]
        for k in range(3):
            pools.append(self.node("MaxPool", [pools[-1]], f"{name}.pool{k}",
                                   kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
        cat = self.node("Concat", pools, f"{name}.cat", axis=1)
        return self.conv_silu(cat, 2 * c, c, 1, 1, f"{name}.cv2")

    def decode(self, x, cin, size, stride, anchors, name):
        """Conv to ANCHORS*(5+classes) channels, then YOLOv5's decode into [1, A*H*W, 5+C]."""
        w = self.const(f"{name}.w", (RNG.standard_normal((ANCHORS * OUT, cin, 1, 1)) * 0.2)
                       .astype(np.float32))
        y = self.node("Conv", [x, w], f"{name}.conv", kernel_shape=[1, 1])
        y = self.node("Reshape", [y, self.const(f"{name}.shape", np.array(
            [1, ANCHORS, OUT, size, size], np.int64))], f"{name}.r")
        y = self.node("Transpose", [y], f"{name}.t", perm=[0, 1, 3, 4, 2])
        y = self.node("Sigmoid", [y], f"{name}.sig")
        cut = lambda start, end, tag: self.node(  # noqa: E731
            "Slice", [y, self.const(f"{name}.{tag}.s", np.array([start], np.int64)),
                      self.const(f"{name}.{tag}.e", np.array([end], np.int64)),
                      self.const(f"{name}.{tag}.a", np.array([4], np.int64))], f"{name}.{tag}")
        xy, wh, rest = cut(0, 2, "xy"), cut(2, 4, "wh"), cut(4, OUT, "conf")
        gy, gx = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
        grid = np.stack([gx, gy], -1).reshape(1, 1, size, size, 2).astype(np.float32) - 0.5
        two = self.const(f"{name}.two", np.float32(2))
        xy = self.node("Mul", [xy, two], f"{name}.xy2")
        xy = self.node("Add", [xy, self.const(f"{name}.grid", grid)], f"{name}.xyg")
        xy = self.node("Mul", [xy, self.const(f"{name}.stride", np.float32(stride))],
                       f"{name}.xys")
        wh = self.node("Mul", [wh, two], f"{name}.wh2")
        wh = self.node("Pow", [wh, two], f"{name}.whp")
        wh = self.node("Mul", [wh, self.const(f"{name}.anchors", np.array(
            anchors, np.float32).reshape(1, ANCHORS, 1, 1, 2))], f"{name}.wha")
        y = self.node("Concat", [xy, wh, rest], f"{name}.cat", axis=-1)
        return self.node("Reshape", [y, self.const(f"{name}.flat", np.array(
            [1, -1, OUT], np.int64))], f"{name}.out")


def _yolo_head(path, resize_form: str):
    b = _Builder()
    p3 = b.conv_silu("images", 3, 16, 3, 2, "stem")          # 32 -> 16
    p4 = b.conv_silu(p3, 16, 32, 3, 2, "down")              # 16 -> 8
    p4 = b.sppf(p4, 32, "sppf")
    lateral = b.conv_silu(p4, 32, 16, 1, 1, "lateral")
    if resize_form == "scales":                              # torch.onnx at opset 13
        up = b.node("Resize", [lateral, "", b.const("up.scales", np.array(
            [1, 1, 2, 2], np.float32))], "up", mode="nearest",
            coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:                                                    # sizes, an empty roi constant
        up = b.node("Resize", [lateral, b.const("up.roi", np.zeros(0, np.float32)), "",
                               b.const("up.sizes", np.array([1, 16, 16, 16], np.int64))], "up",
                    mode="nearest")
    fused = b.node("Concat", [up, p3], "fpn.cat", axis=1)
    fused = b.conv_silu(fused, 32, 16, 3, 1, "fpn.conv")
    small = b.decode(fused, 16, 16, 2, [[10, 13], [16, 30]], "det3")
    large = b.decode(p4, 32, 8, 4, [[30, 61], [62, 45]], "det4")
    b.node("Concat", [small, large], "detections", axis=1)
    graph = helper.make_graph(b.nodes, "yolo_head",
                              [helper.make_tensor_value_info("images", F, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("detections", F, [1, ANCHORS * (16 * 16 + 8 * 8), OUT])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


@pytest.mark.parametrize("resize_form", ["scales", "sizes"])
def test_yolo_head_matches_onnx_runtime(tmp_path, engine, resize_form):
    path = _yolo_head(tmp_path / "yolo.onnx", resize_form)
    images = RNG.uniform(0, 1, (1, 3, 32, 32)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"images": images})[0]
    got = Network(read_onnx(path), engine=engine).infer({"images": images})["detections"]
    assert got.shape == want.shape == (1, ANCHORS * (16 * 16 + 8 * 8), OUT)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
