"""Make the demo models: a small CNN with custom layers, and the same network in built-in ops.

    .venv/bin/python examples/models/make_models.py [--out DIR] [--check]

demo_cnn.xml/.bin          data 1x3x32x32 -> Convolution 8x3x3x3 + Add bias -> ReLU -> GRN
                           (bias=1e-06) -> Convolution 16x8x3x3 -> ReLU -> ReorgYolo (stride=2)
                           -> MaxPool 4x4/4 -> Reshape 1x1024 -> MatMul 1024x10 -> SoftMax
demo_cnn_builtin.xml/.bin  the same weights, GRN and ReorgYolo spelled in ops the built-in set has:
                           GRN = x / Sqrt(ReduceSum(x*x, channels) + bias)
                           ReorgYolo = Reshape to [B, C/s^2, Y*s, X*s] -> SpaceToDepth
                           (blocks_first, s) -> Reshape to [B, C*s^2, Y/s, X/s]

GRN, ReorgYolo and ReLU are the layer types of examples/layers/{grn,reorg,relu}; a config holding
those descriptors runs demo_cnn.xml on custom kernels. OpenVINO has ops of the same names, so it
builds them itself, and it can run both files: --check compares the two on its CPU plugin. GRN's
bias is rewritten to the text "1e-06" after saving (OpenVINO writes the float32 value as
"9.9999999747524271e-07"), because custom-layer Defines take attribute text as written.
The weights are seeded: rerunning the script gives the same files.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 7
INPUT_SHAPE = (1, 3, 32, 32)
GRN_BIAS_TEXT = "1e-06"
REORG_STRIDE = 2


def weights(seed: int = SEED) -> dict[str, np.ndarray]:
    """He-scaled conv and matmul weights, small biases (float32)."""
    rng = np.random.default_rng(seed)

    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return {
        "conv1_w": he((8, 3, 3, 3), 27),
        "conv1_b": (rng.standard_normal((1, 8, 1, 1)) * 0.1).astype(np.float32),
        "conv2_w": he((16, 8, 3, 3), 72),
        "fc_w": he((1024, 10), 1024),
    }


def build(custom: bool, w: dict[str, np.ndarray]):
    """The demo network as an openvino Model; `custom` picks GRN/ReorgYolo or their expansions."""
    import openvino as ov
    from openvino import opset1, opset2, opset13 as ops

    def named(node, name):
        node.set_friendly_name(name)
        return node

    data = ops.parameter(INPUT_SHAPE, np.float32, name="data")
    x = named(ops.convolution(data, ops.constant(w["conv1_w"], name="conv1_w"), [1, 1], [1, 1],
                              [1, 1], [1, 1]), "conv1")
    x = named(ops.add(x, ops.constant(w["conv1_b"], name="conv1_b")), "conv1_bias")
    x = named(ops.relu(x), "relu1")
    if custom:
        x = named(opset1.grn(x, float(GRN_BIAS_TEXT)), "grn")
    else:
        x = grn_in_builtins(x, float(GRN_BIAS_TEXT))
    x = named(ops.convolution(x, ops.constant(w["conv2_w"], name="conv2_w"), [1, 1], [1, 1],
                              [1, 1], [1, 1]), "conv2")
    x = named(ops.relu(x), "relu2")
    if custom:
        x = named(opset2.reorg_yolo(x, [REORG_STRIDE]), "reorg")
    else:
        x = reorg_in_builtins(x, REORG_STRIDE, (1, 16, 32, 32))
    # opset1 MaxPool: one output (opset8's adds an indices output the demo does not need)
    x = named(opset1.max_pool(x, [4, 4], [0, 0], [0, 0], [4, 4]), "pool")
    x = named(ops.reshape(x, ops.constant(np.array([1, 1024], np.int64), name="flat_shape"),
                          special_zero=False), "flatten")
    x = named(ops.matmul(x, ops.constant(w["fc_w"], name="fc_w"), False, False), "fc")
    x = named(ops.softmax(x, 1), "prob")
    result = ops.result(x, name="prob/sink")
    return ov.Model([result], [data], "demo_cnn" if custom else "demo_cnn_builtin")


def grn_in_builtins(x, bias: float):
    """out = x / sqrt(sum over channels of x^2 + bias), OpenVINO's GRN."""
    from openvino import opset13 as ops
    square = ops.multiply(x, x, name="grn/square")
    total = ops.reduce_sum(square, ops.constant(np.array([1], np.int64), name="grn/axes"),
                           keep_dims=True, name="grn/sum")
    shifted = ops.add(total, ops.constant(np.array(bias, np.float32), name="grn/bias"),
                      name="grn/add_bias")
    norm = ops.sqrt(shifted, name="grn/sqrt")
    return ops.divide(x, norm, name="grn")


def reorg_in_builtins(x, s: int, shape: tuple[int, int, int, int]):
    """ReorgYolo (darknet order) in rank-4 ops: view [B,C,Y,X] as [B, C/s^2, Y*s, X*s]; there
    output channel (i*s + j)*C/s^2 + k at (y, x) reads element (k, y*s + i, x*s + j), which is
    SpaceToDepth in blocks_first mode; then view the result as [B, C*s^2, Y/s, X/s]."""
    from openvino import opset13 as ops
    b, c, h, w = shape
    view = ops.reshape(x, ops.constant(np.array([b, c // (s * s), h * s, w * s], np.int64),
                                       name="reorg/view_shape"), False, name="reorg/view")
    moved = ops.space_to_depth(view, "blocks_first", s, name="reorg/space_to_depth")
    return ops.reshape(moved, ops.constant(np.array([b, c * s * s, h // s, w // s], np.int64),
                                           name="reorg/out_shape"), False, name="reorg")


def save(model, path: Path) -> None:
    import openvino as ov
    ov.save_model(model, str(path), compress_to_fp16=False)
    text = path.read_text()
    # the GRN layer's bias as the text a model author writes (see the module docstring)
    text, n = re.subn(r'(type="GRN"[^>]*>\s*<data bias=")[^"]*(")', rf"\g<1>{GRN_BIAS_TEXT}\2",
                      text)
    if "type=\"GRN\"" in text and n != 1:
        raise SystemExit(f"{path}: could not rewrite the GRN bias attribute")
    path.write_text(text)


def check(out: Path) -> float:
    """Run both files on OpenVINO's CPU plugin with one input; return the largest difference."""
    import openvino as ov
    core = ov.Core()
    x = np.random.default_rng(1).standard_normal(INPUT_SHAPE).astype(np.float32)
    results = []
    for name in ("demo_cnn.xml", "demo_cnn_builtin.xml"):
        compiled = core.compile_model(core.read_model(str(out / name)), "CPU",
                                      {"INFERENCE_PRECISION_HINT": "f32"})
        results.append(compiled([x])[0])
    return float(np.abs(results[0] - results[1]).max())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the files")
    parser.add_argument("--check", action="store_true",
                        help="run both models on OpenVINO's CPU plugin and compare")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    w = weights()
    save(build(True, w), args.out / "demo_cnn.xml")
    save(build(False, w), args.out / "demo_cnn_builtin.xml")
    for name in ("demo_cnn", "demo_cnn_builtin"):
        size = sum((args.out / f"{name}{ext}").stat().st_size for ext in (".xml", ".bin"))
        print(f"{args.out / name}.xml  ({size // 1024} KiB with its .bin)")
    if args.check:
        diff = check(args.out)
        print(f"OpenVINO CPU: custom-op model vs built-in model, max |difference| = {diff:.3g}")
        if diff > 1e-5:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
