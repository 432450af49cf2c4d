"""Small causal models over an input x [N, C, T] written with onnx.helper (random weights, N and
T symbolic unless fixed), for the streaming tests (issue 21), and the check they share: the
step (a StreamProgram's numpy stepper) against ONNX Runtime (a test oracle only) running the
whole window up to each step.

The seed's TCN itself is bench/gpu_peers.py's onnx_tcn.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


class CausalModel:
    """Nodes over the graph input `x` [N, C, T]; `save` writes the model with the outputs
    named."""

    def __init__(self, channels: int, seed: int = 0, length=None, batch=None, opset: int = 13):
        self.rng = np.random.default_rng(seed)
        self.channels, self.length, self.batch, self.opset = channels, length, batch, opset
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, value, dtype=np.float32, base: str = "c") -> str:
        from onnx import numpy_helper
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), n))
        return n

    def weight(self, *shape, scale: float = 1.0) -> str:
        w = self.rng.standard_normal(shape) * scale / np.sqrt(max(np.prod(shape[1:]), 1))
        return self.const(w, base="w")

    def add(self, op: str, inputs, name: str | None = None, outputs: int = 1, **attrs):
        from onnx import helper
        n = name or self.name(op.lower())
        outs = [n] + [f"{n}_{k}" for k in range(1, outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=n, **attrs))
        return n

    def causal_conv(self, x: str, cin: int, cout: int, k: int, d: int = 1, group: int = 1,
                    form: str = "chomp", name: str | None = None) -> str:
        """A causal 1-D convolution as exporters write it: `chomp` (torch's TCN: padding
        (k-1)*d on both sides, then a Slice cutting the last (k-1)*d steps; "chomp to T": the
        Slice's end written as the length, which must be fixed), `pad` (a zero
        Pad of the start, then an unpadded Conv) or `direct` (pads [(k-1)*d, 0])."""
        pad = (k - 1) * d
        w = self.weight(cout, cin // group, k)
        b = self.const(self.rng.standard_normal(cout) * 0.1, base="b")
        attrs = dict(kernel_shape=[k], dilations=[d], group=group)
        if form == "pad" and pad:
            x = self.add("Pad", [x, self.const([0, 0, pad, 0, 0, 0], np.int64)])
            return self.add("Conv", [x, w, b], name=name, pads=[0, 0], **attrs)
        if form.startswith("chomp") and pad:
            c = self.add("Conv", [x, w, b], name=name, pads=[pad, pad], **attrs)
            # "chomp to T": the end written as the length (a model of a fixed length)
            end = -pad if form == "chomp" else self.length
            return self.add("Slice", [c, self.const([0], np.int64), self.const([end], np.int64),
                                      self.const([2], np.int64)])
        return self.add("Conv", [x, w, b], name=name, pads=[pad, 0], **attrs)

    def dense_head(self, x: str, channels: int, classes: int, pick: str = "gather",
                   softmax: str = "LogSoftmax") -> str:
        """The last step of x [N, C, T] ("gather": Gather of index -1; "slice": Slice [-1:]
        and Flatten), a Gemm and a softmax over the classes."""
        if pick == "gather":
            last = self.add("Gather", [x, self.const(-1, np.int64)], axis=2)
        else:
            last = self.add("Flatten", [self.add("Slice", [
                x, self.const([-1], np.int64), self.const([2 ** 62], np.int64),
                self.const([2], np.int64)])], axis=1)
        fc = self.add("Gemm", [last, self.weight(classes, channels),
                               self.const(self.rng.standard_normal(classes) * 0.1)], transB=1)
        return self.add(softmax, [fc], axis=1)

    def save(self, path: Path, outputs) -> Path:
        import onnx
        from onnx import TensorProto, helper
        shape = [self.batch or "N", self.channels, self.length or "T"]
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        graph = helper.make_graph(self.nodes, "causal", inputs, outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        onnx.save(onnx.shape_inference.infer_shapes(model), str(path))
        return path


def stream_against_window(program, window_model, x: np.ndarray, rtol: float = 1e-5,
                          atol: float = 0.0) -> float:
    """Steps `program` (ReferenceStream) over x [N, C, T] and checks that at every step t its
    outputs equal ONNX Runtime's for the window x[:, :, :t+1] (a per-step sequence output: its
    last step). `window_model(t)`: the model file to run for a window of t steps (one model
    for every length when its time axis is symbolic). Returns the largest relative
    difference seen (for the record of a tolerance)."""
    import onnxruntime as ort
    from customlayers.ops.stream.reference import ReferenceStream
    stream = ReferenceStream(program, x.shape[0])
    sessions: dict = {}
    worst = 0.0
    for t in range(x.shape[2]):
        got = stream.step(x[:, :, t])
        path = str(window_model(t + 1))
        if path not in sessions:
            sessions[path] = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        sess = sessions[path]
        names = [o.name for o in sess.get_outputs()]
        want = dict(zip(names, sess.run(None, {"x": x[:, :, :t + 1]})))
        for out in program.outputs:
            w = want[out.name][..., -1] if out.per_step_sequence else want[out.name]
            g = got[out.name]
            assert g.shape == w.shape, (out.name, t, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                       err_msg=f"output '{out.name}' at step {t}")
            scale = np.maximum(np.abs(w), 1e-30)
            worst = max(worst, float(np.max(np.abs(g - w) / scale)))
    return worst
