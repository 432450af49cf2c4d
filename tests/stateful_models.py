"""Stateful models (OpenVINO ReadValue/Assign) built with OpenVINO's Python API and saved as
IR, for the state tests (tests/device/test_states.py, test_cli_states.py). OpenVINO is a test
oracle only."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset3 as op3
import openvino.opset6 as op6
from openvino.op.util import Variable, VariableInfo

# OpenVINO's CPU plugin in float32 (a CPU with bf16 would otherwise compute in it)
CPU_FP32 = {"INFERENCE_PRECISION_HINT": "f32"}


def variable(name: str, shape, dtype=np.float32) -> Variable:
    info = VariableInfo()
    info.variable_id = name
    info.data_shape = ov.PartialShape(list(shape))
    info.data_type = ov.Type(dtype)
    return Variable(info)


def save(model, path) -> str:
    ov.save_model(model, str(path), compress_to_fp16=False)
    return str(path)


def running_sum(path, form: str, shape=(2, 4)) -> str:
    """y = state + x; state = y. form: "opset6" (no init), "opset6-const" (init 2),
    "opset6-input" (init 3x: computed from the input), "opset3" (init from a Const)."""
    x = op6.parameter(list(shape), np.float32, name="x")
    if form == "opset3":
        rv = op3.read_value(op3.constant(np.full(shape, 2, np.float32)), "acc")
        add = op3.add(rv, x)
        sink = op3.assign(add, "acc")
    else:
        var = variable("acc", shape)
        if form == "opset6":
            rv = op6.read_value(var)
        elif form == "opset6-const":
            rv = op6.read_value(op6.constant(np.full(shape, 2, np.float32)), var)
        else:
            rv = op6.read_value(op6.multiply(x, op6.constant(np.float32(3))), var)
        add = op6.add(rv, x)
        sink = op6.assign(add, var)
    y = op6.result(add)
    y.get_output_tensor(0).set_names({"y"})
    return save(ov.Model(results=[y], sinks=[sink], parameters=[x], name="sum"), path)


def rnn_cell(path, hidden=6, inputs=5, batch=2) -> str:
    """h = tanh(W x + U h) (opset6, no init): h is the state and the output."""
    rng = np.random.default_rng(21)
    w = rng.standard_normal((inputs, hidden)).astype(np.float32) * 0.5
    u = rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.5
    x = op6.parameter([batch, inputs], np.float32, name="x")
    var = variable("h", (batch, hidden))
    h = op6.read_value(var)
    new = op6.tanh(op6.add(op6.matmul(x, op6.constant(w), False, False),
                           op6.matmul(h, op6.constant(u), False, False)))
    sink = op6.assign(new, var)
    y = op6.result(new)
    y.get_output_tensor(0).set_names({"h_out"})
    return save(ov.Model(results=[y], sinks=[sink], parameters=[x], name="rnn"), path)


def low_latency_rnn(folder, cell: str, steps=3, inputs=4, hidden=5) -> str:
    """An ONNX GRU or LSTM (onnx.helper; cell "GRU", "GRU-linear-before-reset" or "LSTM") of
    `steps` time steps, converted by OpenVINO, made stateful by its LowLatency2 pass (the
    initial states become ReadValue/Assign), saved as IR; returns the .xml path."""
    import onnx
    import openvino.passes
    from onnx import TensorProto, helper, numpy_helper
    kind = cell.split("-")[0]
    gates = 3 if kind == "GRU" else 4
    rng = np.random.default_rng(17)
    weights = {"W": rng.standard_normal((1, gates * hidden, inputs)) * 0.5,
               "R": rng.standard_normal((1, gates * hidden, hidden)) * 0.5,
               "B": rng.standard_normal((1, 2 * gates * hidden)) * 0.2}
    outs = ["Y", "Y_h"] + ["Y_c"] * (kind == "LSTM")
    extra = {"linear_before_reset": 1} if cell.endswith("reset") else {}
    node = helper.make_node(kind, ["X", "W", "R", "B"], outs, hidden_size=hidden, **extra)
    graph = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, 1, inputs])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    onnx_path = str(folder / f"{cell}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), onnx_path)
    model = ov.convert_model(onnx_path)
    manager = openvino.passes.Manager()
    manager.register_pass(openvino.passes.LowLatency2())
    manager.run_passes(model)
    return save(model, folder / f"{cell}_low_latency.xml")
