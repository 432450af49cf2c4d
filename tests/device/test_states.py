"""Issue 21 points 1 and 2: a model's state (OpenVINO's ReadValue/Assign) lives on the device
across the inferences of one request, with OpenVINO's API (query_state, reset_state; name,
state, set_state, reset), and stateful IR files run as OpenVINO's CPU plugin runs them.

The models are built with OpenVINO's Python API and saved as IR (opset3 and opset6
ReadValue, with and without an init: none, a Const, one computed from the input); each runs a
sequence of 24 inferences on one of our requests and on an OpenVINO CPU request, with
reset_state, set_state and one state's reset in between, compared at every step."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.api import Engine, ModelError, Network, TensorError

ov = pytest.importorskip("openvino")
import openvino.opset6 as op6  # noqa: E402
from stateful_models import (CPU_FP32, low_latency_rnn, rnn_cell, running_sum, save,  # noqa: E402
                             variable)  # noqa: E402

STEPS = 24


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def _sequence(rng, shape):
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(STEPS)]


def _compare_sequences(path, engine, shape, set_value, input_name="x"):
    """Our request and OpenVINO's over one sequence with a reset_state at step 8, a set_state
    of every state at 15 (set_value(shape) gives each its value) and the first state's reset
    at 20; every step's outputs and states compared, by name."""
    net = Network(path, None, engine, tuning="off")
    ours = net.create_request()
    theirs = ov.Core().compile_model(path, "CPU", CPU_FP32).create_infer_request()
    names = [o.get_any_name() for o in theirs.model_outputs]
    xs = _sequence(np.random.default_rng(5), shape)
    for t, x in enumerate(xs):
        their_states = {s.name: s for s in theirs.query_state()}
        if t == 8:
            ours.reset_state()
            theirs.reset_state()
        if t == 15:
            for state in ours.query_state():
                value = set_value(state.state.shape)
                state.set_state(value)
                their_states[state.name].state = ov.Tensor(value)
        if t == 20:
            first = ours.query_state()[0]
            first.reset()
            their_states[first.name].reset()
        got = ours.infer({input_name: x})
        want = dict(zip(names, theirs.infer({input_name: x}).values()))
        assert got.keys() == want.keys()
        for name, value in got.items():
            np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-6,
                                       err_msg=f"output {name} step {t}")
        their_states = {s.name: s for s in theirs.query_state()}
        assert {s.name for s in ours.query_state()} == set(their_states)
        for state in ours.query_state():
            np.testing.assert_allclose(state.state, their_states[state.name].state.data,
                                       rtol=1e-5, atol=1e-6,
                                       err_msg=f"state {state.name} after step {t}")


def _filled(value):
    return lambda shape: np.full(shape, value, np.float32)


@pytest.mark.parametrize("form", ["opset6", "opset6-const", "opset6-input", "opset3"])
def test_a_running_sum_matches_openvino_over_a_sequence(tmp_path, engine, form):
    path = running_sum(tmp_path / f"sum_{form}.xml", form)
    _compare_sequences(path, engine, (2, 4), _filled(5))


def test_an_rnn_cell_matches_openvino_over_a_sequence(tmp_path, engine):
    path = rnn_cell(tmp_path / "rnn.xml")
    _compare_sequences(path, engine, (2, 5), lambda shape: np.random.default_rng(3).uniform(
        -1, 1, shape).astype(np.float32))


@pytest.mark.parametrize("cell", ["GRU", "GRU-linear-before-reset", "LSTM"])
def test_a_low_latency_recurrent_network_matches_openvino(tmp_path, engine, cell):
    """An ONNX GRU/LSTM converted by OpenVINO and made stateful by its LowLatency2 pass:
    GRUSequence/LSTMSequence (read as the built-in GRU/LSTM), its hidden (and cell) state a
    ReadValue whose init is a Broadcast of zeros to a ShapeOf (folded when read)."""
    path = low_latency_rnn(tmp_path, cell)
    _compare_sequences(path, engine, (3, 1, 4), lambda shape: np.random.default_rng(8).uniform(
        -1, 1, shape).astype(np.float32), input_name="X")


def test_the_state_api_has_openvinos_names_and_reads_zeros_after_a_reset(tmp_path, engine):
    """As OpenVINO's CPU plugin: before any run and after a reset the state reads as zeros,
    though the next run reads the init (here 2 + x)."""
    net = Network(running_sum(tmp_path / "s.xml", "opset6-const"), None, engine, tuning="off")
    req = net.create_request()
    (state,) = req.query_state()
    assert state.name == "acc"
    np.testing.assert_array_equal(state.state, np.zeros((2, 4), np.float32))
    ones = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(req.infer({"x": ones})["y"], 3 * ones)
    np.testing.assert_array_equal(req.infer({"x": ones})["y"], 4 * ones)
    np.testing.assert_array_equal(state.state, 4 * ones)
    state.reset()
    np.testing.assert_array_equal(state.state, 0 * ones)
    np.testing.assert_array_equal(req.infer({"x": ones})["y"], 3 * ones)
    state.state = np.full((2, 4), 7.0)              # a float64 array of the state's kind
    np.testing.assert_array_equal(req.infer({"x": ones})["y"], 8 * ones)


def test_each_request_has_its_own_state(tmp_path, engine):
    net = Network(running_sum(tmp_path / "s.xml", "opset6"), None, engine, tuning="off")
    a, b = net.create_request(), net.create_request()
    ones = np.ones((2, 4), np.float32)
    for _ in range(3):
        a.infer({"x": ones})
    b.infer({"x": 10 * ones})
    np.testing.assert_array_equal(a.query_state()[0].state, 3 * ones)
    np.testing.assert_array_equal(b.query_state()[0].state, 10 * ones)
    b.reset_state()
    np.testing.assert_array_equal(a.infer({"x": ones})["y"], 4 * ones)


def test_an_assign_runs_after_every_read_of_itsvariable(tmp_path, engine):
    """The Assign's input does not depend on the ReadValue, and a second ReadValue of the
    variable comes after it in the model: both read the previous run's value, so
    y_t = x_t + 4 x_(t-1) (against numpy: OpenVINO's CPU plugin refuses a ReadValue that no
    Assign follows, "doesn't have sibling output")."""
    x = op6.parameter([3], np.float32, name="x")
    var = variable("prev", (3,))
    sink = op6.assign(op6.multiply(x, op6.constant(np.float32(2))), var)
    first = op6.read_value(var)
    second = op6.read_value(var)
    y = op6.result(op6.add(op6.add(x, first), second))
    path = save(ov.Model(results=[y], sinks=[sink], parameters=[x], name="delay"),
                 tmp_path / "delay.xml")
    req = Network(path, None, engine, tuning="off").create_request()
    previous = np.zeros(3, np.float32)
    for t, x_t in enumerate(_sequence(np.random.default_rng(9), (3,))):
        got = next(iter(req.infer({"x": x_t}).values()))
        np.testing.assert_allclose(got, x_t + 4 * previous, rtol=1e-5, err_msg=f"step {t}")
        previous = x_t


def test_an_out_of_order_queue_orders_the_reads_before_the_write(tmp_path, test_device):
    import pyopencl as cl
    ctx = cl.Context([test_device])
    try:
        queue = cl.CommandQueue(
            ctx, test_device, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    except cl.Error:
        pytest.skip("the device has no out-of-order queues")
    net = Network(rnn_cell(tmp_path / "rnn.xml"), None, Engine.from_queue(queue), tuning="off")
    req = net.create_request()
    theirs = ov.Core().compile_model(str(tmp_path / "rnn.xml"), "CPU",
                                     CPU_FP32).create_infer_request()
    for t, x in enumerate(_sequence(np.random.default_rng(2), (2, 5))):
        np.testing.assert_allclose(req.infer({"x": x})["h_out"], theirs.infer({"x": x})[0],
                                   rtol=1e-5, atol=1e-6, err_msg=f"step {t}")


# -- bad input ---------------------------------------------------------------------------------
def test_set_state_refuses_a_wrong_shape_or_type(tmp_path, engine):
    net = Network(running_sum(tmp_path / "s.xml", "opset6"), None, engine, tuning="off")
    (state,) = net.create_request().query_state()
    with pytest.raises(TensorError, match=r"state 'acc': set_state got shape \[4, 2\]; the "
                                          r"state is \[2, 4\] f32"):
        state.set_state(np.zeros((4, 2), np.float32))
    with pytest.raises(TensorError, match="state 'acc': set_state got complex128 values; the "
                                          "state holds float32"):
        state.set_state(np.zeros((2, 4), np.complex128))
    np.testing.assert_array_equal(state.state, np.zeros((2, 4), np.float32))


def _graph_with(tmp_path, build) -> str:
    x = op6.parameter([2, 4], np.float32, name="x")
    results, sinks = build(x)
    return save(ov.Model(results=results, sinks=sinks, parameters=[x], name="bad"),
                 tmp_path / "bad.xml")


def test_an_assign_without_a_read_value_is_refused_naming_it(tmp_path):
    var = variable("lost", (2, 4))
    path = _graph_with(tmp_path, lambda x: ([op6.result(op6.relu(x))],
                                            [op6.assign(op6.relu(x), var)]))
    with pytest.raises(ModelError, match=r"layer 'Assign_\d+' \(type Assign\) at .*bad.xml:\d+: "
                                         r"assigns variable 'lost', which no ReadValue"):
        Network(path)


def test_two_assigns_of_one_variable_are_refused(tmp_path):
    var = variable("v", (2, 4))

    def build(x):
        rv = op6.read_value(var)
        y = op6.add(rv, x)
        return [op6.result(y)], [op6.assign(y, var), op6.assign(op6.relu(y), var)]
    with pytest.raises(ModelError, match=r"variable 'v' is written by two Assign layers: "
                                         r"'Assign_\d+' \(Assign at .*bad.xml:\d+\) and"):
        Network(_graph_with(tmp_path, build))


def test_a_variable_whose_shape_disagrees_is_refused(tmp_path):
    """Two ReadValues of variable 'acc', [2,4] and [2,2] (the second made for a variable 'b',
    renamed in the file)."""
    acc, other = variable("acc", (2, 4)), variable("b", (2, 2))

    def build(x):
        y = op6.add(op6.read_value(acc), x)
        z = op6.relu(op6.read_value(other))
        return [op6.result(y), op6.result(z)], [op6.assign(y, acc)]
    path = _graph_with(tmp_path, build)
    text = open(path).read().replace('variable_id="b"', 'variable_id="acc"')
    open(path, "w").write(text)
    with pytest.raises(ModelError, match=r"variable 'acc': 'ReadValue_\d+' \(ReadValue at "
                                         r".*bad.xml:\d+\) has shape \[2,2\], but "
                                         r"'ReadValue_\d+' \(ReadValue at .*bad.xml:\d+\) has "
                                         r"\[2,4\]"):
        Network(path)


def test_a_read_value_of_unknown_shape_without_init_is_refused(tmp_path, engine):
    xml = running_sum(tmp_path / "s.xml", "opset6")
    text = open(xml).read().replace('variable_shape="2,4"', 'variable_shape="?,4"')
    start = text.index('type="ReadValue"')
    end = text.index("</layer>", start)
    text = text[:start] + text[start:end].replace("<dim>2</dim>", "<dim>-1</dim>") + text[end:]
    (tmp_path / "s.xml").write_text(text)
    with pytest.raises(Exception, match=r"ReadValue.*variable 'acc' has no init input, and its "
                                        r"shape \[\?,4\]"):
        Network(xml, None, engine, tuning="off").infer({"x": np.ones((2, 4), np.float32)})


def test_a_request_with_states_is_freed_when_dropped(tmp_path, engine):
    """No reference cycle between a request and its states: dropping it frees it (and the
    device memory device_memory.py counts for it) at once, not at a garbage collection; a
    VariableState kept keeps its request."""
    import weakref
    net = Network(running_sum(tmp_path / "s.xml", "opset6"), None, engine, tuning="off")
    req = net.create_request()
    gone = weakref.ref(req)
    del req
    assert gone() is None
    (state,) = net.create_request().query_state()
    np.testing.assert_array_equal(state.state, np.zeros((2, 4), np.float32))


def test_a_variable_whose_tensors_disagree_once_shapes_are_known_is_refused(tmp_path, engine):
    """Declared [?,4] everywhere, so the file cannot tell: for an input of [2,4] the ReadValue
    (init: the input) holds [2,4] and the Assign stores a ReduceSum of [1,4]; the plan refuses
    it naming both layers."""
    x = op6.parameter([-1, 4], np.float32, name="x")
    var = variable("acc", (-1, 4))
    y = op6.add(op6.read_value(x, var), x)
    sink = op6.assign(ov.opset8.reduce_sum(y, op6.constant(np.int64([0])), True), var)
    path = save(ov.Model(results=[op6.result(y)], sinks=[sink], parameters=[x], name="m"),
                tmp_path / "m.xml")
    net = Network(path, None, engine, tuning="off")
    # (the plan's graph, its shapes made concrete, says it; else the plan's states would)
    with pytest.raises(ModelError, match=r"variable 'acc': .*'Assign_\d+'.* at .*m.xml:\d+.* "
                                         r"\[1, ?4\].*, but .*'ReadValue_\d+'.* at "
                                         r".*m.xml:\d+.* \[2, ?4\]"):
        net.infer({"x": np.ones((2, 4), np.float32)})


def test_streaming_a_model_with_variables_steps_one_request(tmp_path, engine):
    """Network.streaming() on an IR with ReadValue/Assign: each step one inference on the
    stream's own request (a RequestStream), its state carried; reset() restarts it."""
    model = running_sum(tmp_path / "sum.xml", "opset6")
    stream = Network(model, engine=engine).streaming()
    xs = np.random.default_rng(5).standard_normal((6, 2, 4)).astype(np.float32)
    for _ in range(2):
        got = np.stack([next(iter(stream.step(x).values())) for x in xs])
        np.testing.assert_allclose(got, np.cumsum(xs, axis=0), rtol=1e-5, atol=1e-6)
        stream.reset()
    assert stream.t == 0 and len(stream.query_state()) == 1


def test_a_stateful_stream_reads_zeros_of_its_shape_before_and_after_its_steps(tmp_path,
                                                                              engine):
    """Before the first step, the states of a model that declares its shapes read zeros of
    their shape (OpenVINO's before a run), the steps then run on that request (a state set
    there is the first step's); after reset() zeros again."""
    stream = Network(running_sum(tmp_path / "sum.xml", "opset6"), engine=engine).streaming()
    stream.reset()
    (state,) = stream.query_state()
    np.testing.assert_array_equal(state.state, np.zeros((2, 4), np.float32))
    state.set_state(np.full((2, 4), 3, np.float32))
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(next(iter(stream.step(x).values())), np.full((2, 4), 4))
    stream.reset()
    np.testing.assert_array_equal(stream.query_state()[0].state, np.zeros((2, 4), np.float32))
    with pytest.raises(TensorError, match=r"a step of shapes .*\[3, 4\]; this stream's "
                                          r"request runs .*\[2, 4\]"):
        stream.step(np.ones((3, 4), np.float32))
