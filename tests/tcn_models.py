"""TCN models of temporal blocks in the forms exporters write (onnx.helper, random weights), for
the temporal-block fusion's tests (passes/temporal, ops/nn/temporal_block.py).

Each block: causal Conv (+ bias) -> ReLU -> causal Conv (+ bias) -> ReLU, plus x or a 1x1 Conv
of it, Add, ReLU. The causal forms: "chomp" (pads (k-1)d on both sides, then a Slice cutting
(k-1)d off the end: torch's Chomp1d), "pads" (pads [(k-1)d, 0] on the Conv itself) and "pad_op"
(a Pad node before the Conv)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Spec:
    cin: int
    cout: int
    k: int
    d: int
    form: str = "chomp"
    bias: bool = True


def tcn_model(path: Path, batch: int, length: int, specs: list[Spec], seed: int = 0,
              extra_output: str = "") -> Path:
    """The blocks of `specs` in a row, output y = the last block's output. `extra_output`: a
    value of the model made a graph output too (a block's inside, to keep it unfused)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    init, nodes = [], []

    def f32(a, n):
        init.append(numpy_helper.from_array(np.asarray(a, np.float32), n))
        return n

    def i64(v, n):
        init.append(numpy_helper.from_array(np.array(v, np.int64), n))
        return n

    def conv(name, x, cin, cout, k, d, form, bias):
        pad = (k - 1) * d
        w = rng.standard_normal((cout, cin, k)) * 0.8 / np.sqrt(cin * k)
        ins = [x, f32(w, name + "w")] + ([f32(rng.standard_normal(cout) * 0.1, name + "b")]
                                         if bias else [])
        if form == "pad_op":
            nodes.append(helper.make_node("Pad", [x, i64([0, 0, pad, 0, 0, 0], name + "p")],
                                          [name + "x"]))
            ins[0] = name + "x"
            pads = [0, 0]
        else:
            pads = [pad, pad] if form == "chomp" else [pad, 0]
        out = name if form != "chomp" else name + "full"
        nodes.append(helper.make_node("Conv", ins, [out], pads=pads, dilations=[d],
                                      kernel_shape=[k]))
        if form == "chomp":
            nodes.append(helper.make_node("Slice", [out, i64([0], name + "s0"),
                                                    i64([-pad], name + "s1"),
                                                    i64([2], name + "ax")], [name]))
        return name

    x = "x"
    for i, s in enumerate(specs):
        h = conv(f"b{i}c1", x, s.cin, s.cout, s.k, s.d, s.form, s.bias)
        nodes.append(helper.make_node("Relu", [h], [f"b{i}r1"]))
        h = conv(f"b{i}c2", f"b{i}r1", s.cout, s.cout, s.k, s.d, s.form, s.bias)
        nodes.append(helper.make_node("Relu", [h], [f"b{i}r2"]))
        res = x
        if s.cin != s.cout:
            res = conv(f"b{i}down", x, s.cin, s.cout, 1, 1, "pads", s.bias)
        nodes.append(helper.make_node("Add", [f"b{i}r2", res], [f"b{i}a"]))
        nodes.append(helper.make_node("Relu", [f"b{i}a"], [f"b{i}o"]))
        x = f"b{i}o"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    shape = lambda c: [batch, c, length]  # noqa: E731
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape(specs[-1].cout))]
    if extra_output:
        outputs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "tcn_forms", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                           shape(specs[0].cin))],
        outputs, init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8          # what every onnxruntime of opset 13 reads
    onnx.save(model, path)
    return path


def ort_run(path: Path, feeds: dict) -> dict:
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))
