"""CPU layers in Python (@cpu_layer, -l, Registry.load_python) through the public surface: in
ONNX models between device kernels, overriding built-ins, with infer_async not waiting for the
host, and every way a user's module can be wrong."""
from __future__ import annotations

import importlib.util
import os
import textwrap
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from customlayers.api import Engine, ExecutionError, PythonLayerError, Registry
from customlayers.cli import main as cli_main
from customlayers.errors import LayerRedefinedWarning
from customlayers.runtime.compile.network import Network
from python_layer_texts import SOFTSIGN, grn_layer

ROOT = Path(__file__).resolve().parents[2]
RELU_REFERENCE = ROOT / "examples" / "layers" / "relu" / "relu_reference.py"
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it
SHAPE = (1, 3, 4, 5)


def main(argv: list[str]) -> int:
    return cli_main(argv[:1] + ["-d", TEST_DEVICE] + argv[1:])


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def chain_model(path: Path, middle: str, domain: str = "com.example", **attrs) -> Path:
    """x -> Relu (built-in kernel) -> `middle` -> Neg (built-in kernel) -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node(middle, ["a"], ["b"], name="mid", domain=domain, **attrs),
             helper.make_node("Neg", ["b"], ["y"], name="neg")]
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)])
    opsets = [helper.make_opsetid("", 13)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    return path


def rand(shape=SHAPE, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def engine(cl_env):
    return Engine(cl_env[2])


def test_python_layer_in_an_onnx_model_matches_numpy(tmp_path, engine):
    registry = Registry(engine)
    assert not list(registry.load_python(write(tmp_path, "layers.py", SOFTSIGN)))
    net = Network(chain_model(tmp_path / "m.onnx", "Softsign", alpha=0.5), registry, engine)
    x = rand()
    got = net.infer({"x": x})["y"]
    a = np.maximum(x, 0)
    np.testing.assert_allclose(got, -(a / (1 + 0.5 * np.abs(a))), rtol=1e-6, atol=1e-7)
    assert [s.impl for s in net.plan.steps] == ["built-in", "python", "built-in"]


def test_python_layer_overrides_a_builtin_with_the_message(tmp_path, engine):
    """The example's ReLU reference, loaded with -l's API, replaces the built-in ReLU."""
    registry = Registry(engine)
    registry.load_python(RELU_REFERENCE)
    said = []
    net = Network(chain_model(tmp_path / "m.onnx", "Relu", domain=""), registry, engine,
                  messages=said.append)
    assert said == [f"info: custom layer 'ReLU' ({RELU_REFERENCE}:8) overrides the built-in "
                    f"ReLU for 2 layer(s)"]
    assert [s.impl for s in net.plan.steps] == ["python", "python", "built-in"]
    x = rand(seed=3)
    np.testing.assert_array_equal(net.infer({"x": x})["y"], -np.maximum(x, 0))


GATED = '''
import threading
import numpy as np
from customlayers.api import cpu_layer

STARTED = threading.Event()
GATE = threading.Event()
FINISHED = threading.Event()

@cpu_layer("Gated")
class Gated:
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]
    def execute(self, inputs, outputs, attrs):
        STARTED.set()
        GATE.wait(30)
        np.multiply(inputs[0], 2, out=outputs[0])
        FINISHED.set()
'''


def test_infer_async_returns_before_execute_finishes(tmp_path, engine):
    """execute blocks until the test opens the gate, which it does only after infer_async has
    returned: the host enqueued everything (the Neg kernel after the layer too) without
    waiting, and the kernel after the layer still saw its output."""
    path = write(tmp_path, "gated.py", GATED)
    spec = importlib.util.spec_from_file_location("gated_layers_for_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry = Registry(engine)
    registry.load_python(module)          # an imported module works as well as a path
    net = Network(chain_model(tmp_path / "m.onnx", "Gated"), registry, engine)
    x = rand(seed=1)
    request = net.infer_async({"x": x})
    assert module.STARTED.wait(30), "execute never started"
    time.sleep(0.05)
    assert not module.FINISHED.is_set()   # infer_async returned while execute was blocked
    module.GATE.set()
    np.testing.assert_array_equal(request.wait()["y"], -(np.maximum(x, 0) * 2))
    assert module.FINISHED.is_set()


def test_python_layer_in_the_middle_of_two_requests(tmp_path, engine):
    """Several requests in flight, each with its own host step."""
    registry = Registry(engine)
    registry.load_python(write(tmp_path, "layers.py", SOFTSIGN))
    net = Network(chain_model(tmp_path / "m.onnx", "Softsign"), registry, engine)
    xs = [rand(seed=s) for s in range(3)]
    requests = [net.infer_async({"x": x}) for x in xs]
    for x, r in zip(xs, requests):
        a = np.maximum(x, 0)
        np.testing.assert_allclose(r.wait()["y"], -(a / (1 + np.abs(a))), rtol=1e-6)


def _softsign_chain(x: np.ndarray) -> np.ndarray:
    a = np.maximum(x, 0)
    return -(a / (1 + np.abs(a)))


def _many_in_flight(net, rounds: int = 12, nireq: int = 4) -> None:
    """Rounds of `nireq` requests in flight, each item its own values: every output is its own
    item's, never another request's (on the H100 a Python layer read another request's input
    in 5-30% of such rounds while the steps mapped their buffers: host_step.py)."""
    for r in range(rounds):
        xs = [rand(seed=100 * r + i) for i in range(nireq)]
        got = list(net.stream([{"x": x} for x in xs], nireq))
        for i, (x, out) in enumerate(zip(xs, got)):
            np.testing.assert_allclose(out["y"], _softsign_chain(x), rtol=1e-6,
                                       err_msg=f"round {r}, item {i}")


def test_python_layer_in_many_requests_in_flight_reads_its_own_input(tmp_path, engine):
    """The example model (Conv, Relu, GRN, MaxPool) with GRN as a Python layer, rounds of four
    requests in flight, each row against the same model with the OpenCL GRN run alone. On the
    H100 the host steps' maps gave rows of other requests (host_step.py)."""
    model = ROOT / "examples" / "models" / "custom_node.onnx"
    registry = Registry(engine)
    registry.load_python(write(tmp_path, "grn.py", grn_layer(wait_s=0.002)))
    net = Network(str(model), registry, engine)
    kernels = Registry(engine)
    kernels.load(str(ROOT / "examples" / "layers" / "grn" / "grn.xml"))
    ref = Network(str(model), kernels, engine)
    (name,) = net.input_names
    rng = np.random.default_rng(4)
    for r in range(16):
        rows = rng.standard_normal((4, 1, 3, 16, 16)).astype(np.float32)
        got = list(net.stream([{name: row} for row in rows], 4))
        for i, (row, out) in enumerate(zip(rows, got)):
            (key,) = out
            np.testing.assert_allclose(out[key], ref.infer({name: row})[key], rtol=1e-5,
                                       atol=1e-6, err_msg=f"round {r}, row {i}")


def test_host_steps_that_copy_keep_each_request_its_own(tmp_path, engine, monkeypatch):
    """The copying form of the host steps (a device with memory of its own, a GPU), on this
    device whatever it is: the worker reads the inputs, runs, writes the outputs back."""
    from customlayers.runtime.execute import host_step
    real = host_step.HostSteps.__init__
    made = []

    def copying(self, context, device, maps):
        real(self, context, device, maps=False)
        made.append(self)
    monkeypatch.setattr(host_step.HostSteps, "__init__", copying)
    registry = Registry(engine)
    registry.load_python(write(tmp_path, "layers.py", SOFTSIGN))
    net = Network(chain_model(tmp_path / "m.onnx", "Softsign"), registry, engine)
    _many_in_flight(net, rounds=4)
    assert made and all(not h.maps for h in made)


# a layer with no inputs: it runs when the commands before it are done, nothing else orders it
GEN = '''
import numpy as np
from customlayers.api import cpu_layer

@cpu_layer("Gen")
class Gen:
    def output_shapes(self, input_shapes, attrs):
        return [(1, 3, 4, 5)]
    def execute(self, inputs, outputs, attrs):
        outputs[0][...] = 7.0
'''


@pytest.mark.parametrize("copies", [False, True], ids=["as-the-device-does", "copying"])
def test_a_step_without_inputs_waits_for_the_users_events(tmp_path, engine, monkeypatch,
                                                          copies):
    """y comes from a Python layer with no inputs, into the user's buffer B; the user's own copy
    of B's old value waits on their event, and the run waits for that copy (start_async's
    wait_for): the layer may not write B before it (the copying form did, review of stop 41)."""
    import pyopencl as cl
    if copies:
        from customlayers.runtime.execute import host_step
        real = host_step.HostSteps.__init__
        monkeypatch.setattr(host_step.HostSteps, "__init__",
                            lambda self, context, device, maps: real(self, context, device,
                                                                     maps=False))
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Gen", [], ["y"], name="gen", domain="com.example"),
             helper.make_node("Neg", ["a"], ["z"], name="neg")]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in "xyz"]
    graph = helper.make_graph(nodes, "gen", info[:1], info[1:])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                      helper.make_opsetid("com.example", 1)]),
              tmp_path / "gen.onnx")
    registry = Registry(engine)
    registry.load_python(write(tmp_path, "layers.py", GEN))
    net = Network(str(tmp_path / "gen.onnx"), registry, engine)
    old = np.full(SHAPE, -1, np.float32)
    mf = cl.mem_flags
    b = cl.Buffer(engine.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=old)
    c = cl.Buffer(engine.context, mf.READ_WRITE, old.nbytes)
    user_queue = cl.CommandQueue(engine.context, engine.device)
    go = cl.UserEvent(engine.context)
    keep_old = cl.enqueue_copy(user_queue, c, b, byte_count=old.nbytes, wait_for=[go])
    user_queue.flush()
    request = net.create_request()
    request.set_tensor("x", rand())
    request.set_tensor("y", b)
    request.start_async(wait_for=[keep_old])
    time.sleep(0.2)                          # time enough for a step that does not wait
    go.set_status(cl.command_execution_status.COMPLETE)
    request.wait()
    kept, now = np.empty_like(old), np.empty_like(old)
    cl.enqueue_copy(user_queue, kept, c)
    cl.enqueue_copy(user_queue, now, b)
    user_queue.finish()
    np.testing.assert_array_equal(kept, old)
    np.testing.assert_array_equal(now, np.full(SHAPE, 7.0, np.float32))


FAILED_WAIT_FOR = """
import sys, time
import numpy as np
import pyopencl as cl
from customlayers.api import Engine, ExecutionError, Registry
from customlayers.runtime.compile.network import Network
engine = Engine(sys.argv[3])
registry = Registry(engine)
registry.load_python(sys.argv[2])
network = Network(sys.argv[1], registry, engine)
x = np.ones((1, 3, 4, 5), np.float32)
request = network.create_request()
request.set_tensor("x", x)
event = cl.UserEvent(engine.context)           # first an event that completes: the run waits
request.start_async(wait_for=[event])
time.sleep(0.1)
event.set_status(cl.command_execution_status.COMPLETE)
print("waited:", request.wait()["y"].ravel()[0])
event = cl.UserEvent(engine.context)
request.start_async(wait_for=[event])
time.sleep(0.1)
event.set_status(-5)
try:
    request.wait()
except ExecutionError as e:
    print("ExecutionError:", e)
try:
    request.start({"x": x})
    print("ran again:", request.wait()["y"].ravel()[0])
except ExecutionError as e:
    print("refused:", e)
print("a new request:", network.create_request().infer({"x": x})["y"].ravel()[0])
"""


def test_a_failed_wait_for_event_with_a_python_layer_is_an_error_not_an_abort(tmp_path, engine):
    """A run with a Python layer that waits on the user's event, which fails: wait() raises, as
    it does without the Python layer. PoCL 3.1 aborted the process in set_status (PTHREAD ERROR
    in pocl_update_event_failed) when the failure reached a barrier whose event was released
    (stop 41: the host steps now keep them, HostSteps.keep). The request does not run again
    (its steps' maps and barriers failed half-way: its next run read garbage); a new one does.
    Run in a process of its own, which an abort would end."""
    import subprocess
    import sys
    model = chain_model(tmp_path / "m.onnx", "Softsign")
    layers = write(tmp_path, "layers.py", SOFTSIGN)
    script = write(tmp_path, "run.py", FAILED_WAIT_FOR)
    done = subprocess.run([sys.executable, str(script), str(model), str(layers), TEST_DEVICE],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "waited: -0.5" in done.stdout, said                       # -(1 / (1 + 1))
    assert "ExecutionError: wait_for event 0 failed" in done.stdout, said
    assert "refused: this request's run was stopped by a failed wait_for event" in done.stdout \
        and "create a new request" in done.stdout, said
    assert "a new request: -0.5" in done.stdout, said


FAILING = '''
import numpy as np
from customlayers.api import cpu_layer

@cpu_layer("Softsign")
class Softsign:
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]
    def execute(self, inputs, outputs, attrs):
        outputs[0][...] = scale(inputs[0])

def scale(x):
    raise ValueError("the user's own bug")
'''


def test_error_in_execute_names_the_layer_and_keeps_the_users_traceback(tmp_path, engine):
    path = write(tmp_path, "failing.py", FAILING)
    registry = Registry(engine)
    registry.load_python(path)
    net = Network(chain_model(tmp_path / "m.onnx", "Softsign"), registry, engine)
    request = net.infer_async({"x": rand()})          # returns: the error comes with wait()
    with pytest.raises(ExecutionError) as info:
        request.wait()
    e = info.value
    assert str(e).startswith("layer 'mid' (type Softsign)")
    # the line of `def execute` (it was the class decorator's, 5: a new-user trial)
    assert f"Softsign.execute ({path}:9) raised ValueError: the user's own bug" in str(e)
    assert isinstance(e.__cause__, ValueError) and e.user_code
    frames = [(f.filename, f.lineno) for f in
              __import__("traceback").extract_tb(e.__cause__.__traceback__)]
    assert (str(path), 10) in frames and (str(path), 13) in frames
    # the request is usable again, and the network too
    with pytest.raises(ExecutionError):
        net.infer({"x": rand()})


def test_cli_prints_the_users_traceback_without_ours(tmp_path, capsys):
    path = write(tmp_path, "failing.py", FAILING)
    model = chain_model(tmp_path / "m.onnx", "Softsign")
    assert main(["run", "-m", str(model), "-l", str(path)]) == 1
    err = capsys.readouterr().err
    assert "error: layer 'mid' (type Softsign)" in err
    assert f'File "{path}", line 10, in execute' in err
    assert f'File "{path}", line 13, in scale' in err
    assert err.rstrip().endswith("ValueError: the user's own bug")
    assert "customlayers/runtime" not in err and "concurrent/futures" not in err


def test_run_with_l_and_profile_shows_the_host_step(tmp_path, capsys):
    path = write(tmp_path, "layers.py", SOFTSIGN)
    model = chain_model(tmp_path / "m.onnx", "Softsign")
    assert main(["run", "-m", str(model), "-l", str(path), "-pc"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("mid "))
    fields = row.split()
    assert fields[1:4] == ["Softsign", "python", "Softsign.execute"]
    assert float(fields[4]) > 0


def test_benchmark_takes_l(tmp_path, capsys):
    path = write(tmp_path, "layers.py", SOFTSIGN)
    model = chain_model(tmp_path / "m.onnx", "Softsign")
    assert main(["benchmark", "-m", str(model), "-l", str(path), "-niter", "3"]) == 0
    out = capsys.readouterr().out
    assert "count:      3 inferences" in out and "throughput:" in out


def test_run_layer_runs_a_python_layer(tmp_path, capsys):
    path = write(tmp_path, "layers.py", SOFTSIGN)
    x = rand()
    np.save(tmp_path / "x.npy", x)
    assert main(["run-layer", "-l", str(path), "--layer", "Softsign", "-i",
                 str(tmp_path / "x.npy"), "--param", "alpha=2", "-o",
                 str(tmp_path / "y.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), x / (1 + 2 * np.abs(x)),
                               rtol=1e-6)


def test_run_layer_gives_a_python_layer_read_only_inputs_too(tmp_path, capsys):
    """As in a model: run alone, a write into an input succeeded silently (a new-user trial)."""
    text = SOFTSIGN.replace(
        'np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])',
        'inputs[0][...] = 0; outputs[0][...] = 1')
    path = write(tmp_path, "layers.py", text)
    np.save(tmp_path / "x.npy", rand())
    assert main(["run-layer", "-l", str(path), "--layer", "Softsign", "-i",
                 str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 1
    assert "raised ValueError: assignment destination is read-only" in capsys.readouterr().err
    assert not (tmp_path / "y.npy").exists()


# -- a user's module that is wrong ------------------------------------------------------------
def load_error(tmp_path, text: str) -> PythonLayerError:
    path = write(tmp_path, "bad.py", text)
    with pytest.raises(PythonLayerError) as info:
        Registry().load_python(path)
    return info.value


def test_syntax_error_names_the_file_and_line(tmp_path):
    e = load_error(tmp_path, "import numpy\n\ndef broken(:\n    pass\n")
    assert str(e).startswith(f"{tmp_path / 'bad.py'}:3: loading the Python layers raised "
                             f"SyntaxError")
    assert e.user_code and isinstance(e.__cause__, SyntaxError)


def test_import_failure_names_the_file_and_line_and_cli_shows_it(tmp_path, capsys):
    e = load_error(tmp_path, "import numpy\nvalue = undefined_name + 1\n")
    assert str(e) == (f"{tmp_path / 'bad.py'}:2: loading the Python layers raised NameError: "
                      f"name 'undefined_name' is not defined")
    model = chain_model(tmp_path / "m.onnx", "Softsign")
    assert main(["run", "-m", str(model), "-l", str(tmp_path / "bad.py")]) == 1
    err = capsys.readouterr().err
    assert f'File "{tmp_path / "bad.py"}", line 2, in <module>' in err
    assert "importlib" not in err and "customlayers/" not in err


def test_class_without_execute(tmp_path):
    e = load_error(tmp_path, '''
        from customlayers.api import cpu_layer

        @cpu_layer("NoExec")
        class NoExec:
            def output_shapes(self, input_shapes, attrs):
                return [input_shapes[0]]
        ''')
    assert str(e) == (f"{tmp_path / 'bad.py'}:4: class NoExec (@cpu_layer(\"NoExec\")) has no "
                      f"execute(self, inputs, outputs, attrs) method")


def test_execute_with_the_wrong_parameters(tmp_path):
    e = load_error(tmp_path, '''
        from customlayers.api import cpu_layer

        @cpu_layer("Two")
        class Two:
            def output_shapes(self, input_shapes, attrs):
                return [input_shapes[0]]
            def execute(self, inputs):
                pass
        ''')
    assert "execute must take (self, inputs, outputs, attrs); it is execute(self, inputs)" \
        in str(e)


def test_module_without_layers_and_missing_file(tmp_path):
    e = load_error(tmp_path, "import numpy\n")
    assert "defines no layer: decorate a class with @cpu_layer(\"LayerType\")" in str(e)
    with pytest.raises(PythonLayerError, match="no such Python layer file"):
        Registry().load_python(tmp_path / "nowhere.py")


def network_error(tmp_path, engine, text: str, error=PythonLayerError):
    registry = Registry(engine)
    registry.load_python(write(tmp_path, "layers.py", text))
    with pytest.raises(error) as info:
        Network(chain_model(tmp_path / "m.onnx", "Softsign"), registry, engine).infer(
            {"x": rand()})
    return str(info.value)


def test_output_shapes_returning_one_shape_is_a_clear_error(tmp_path, engine):
    text = SOFTSIGN.replace("return [input_shapes[0]]", "return input_shapes[0]")
    message = network_error(tmp_path, engine, text)
    assert "Softsign.output_shapes (" in message
    assert ("returned (1, 3, 4, 5), a single shape; return a list of shapes, one per "
            "output: [(1, 3, 4, 5)]") in message


def test_output_shapes_returning_nonsense_is_a_clear_error(tmp_path, engine):
    text = SOFTSIGN.replace("return [input_shapes[0]]", "return ['wide']")
    message = network_error(tmp_path, engine, text)
    assert "returned ['wide']; expected a list with one shape per output" in message


def test_an_output_execute_did_not_fill_is_an_error(tmp_path, engine):
    text = SOFTSIGN.replace(
        'np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])',
        'outputs[0][:, :2] = inputs[0][:, :2]')
    message = network_error(tmp_path, engine, text, ExecutionError)
    assert message.startswith("layer 'mid' (type Softsign)")
    assert ("left 20 of 60 element(s) of output 0 (shape [1, 3, 4, 5]) unwritten, the first at "
            "index (0, 2, 0, 0)") in message


def test_replacing_an_output_instead_of_filling_it_is_an_error(tmp_path, engine):
    text = SOFTSIGN.replace(
        'np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])',
        'outputs[0] = inputs[0] * 2')
    message = network_error(tmp_path, engine, text, ExecutionError)
    assert "replaced outputs[0] instead of filling it" in message


def test_inputs_are_read_only(tmp_path, engine):
    """An input is another layer's buffer (or the network's): writing into it is refused."""
    text = SOFTSIGN.replace(
        'np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])',
        'inputs[0][...] = 0')
    message = network_error(tmp_path, engine, text, ExecutionError)
    assert "raised ValueError: assignment destination is read-only" in message


def test_a_type_loaded_again_is_a_warning_and_the_later_wins(tmp_path, engine):
    registry = Registry(engine)
    first = write(tmp_path, "first.py", SOFTSIGN)
    second = write(tmp_path, "second.py", SOFTSIGN.replace("1 + attrs", "2 + attrs"))
    assert not list(registry.load_python(first))
    with pytest.warns(LayerRedefinedWarning, match="'Softsign' is defined again"):
        [warning] = list(registry.load_python(second))
    assert warning.render() == (f"{second}:5:1: warning[CL070]: layer type 'Softsign' is "
                                f"defined again (first at {first}:5); this later definition "
                                f"is used (layer Softsign)")
    net = Network(chain_model(tmp_path / "m.onnx", "Softsign"), registry, engine)
    x = rand(seed=7)
    a = np.maximum(x, 0)
    np.testing.assert_allclose(net.infer({"x": x})["y"], -(a / (2 + np.abs(a))), rtol=1e-6)


# -- a user's code that raises what is not an Exception ----------------------------------------
BASE_EXCEPTIONS = '''
import sys
from customlayers.api import cpu_layer

class Abort(BaseException):
    """The user's own, outside the Exception tree."""

WHEN = "{when}"
if WHEN == "import":
    raise Abort("at import")
if WHEN == "exit":
    sys.exit(3)

@cpu_layer("Softsign")
class Softsign:
    def __init__(self):
        if WHEN == "init":
            raise SystemExit("in __init__")
    def output_shapes(self, input_shapes, attrs):
        if WHEN == "shapes":
            raise Abort("in output_shapes")
        return [input_shapes[0]]
    def execute(self, inputs, outputs, attrs):
        raise Abort("in execute")
'''


@pytest.mark.parametrize("when, raised", [("import", "Abort: at import"),
                                          ("exit", "SystemExit: 3"),
                                          ("init", "SystemExit: in __init__")])
def test_a_base_exception_while_loading_is_a_python_layer_error(tmp_path, capsys, when, raised):
    """A BaseException subclass (or SystemExit) raised by the user's module escaped `except
    Exception`: a traceback through ours, or the CLI exiting with the user's status."""
    path = write(tmp_path, "layers.py", BASE_EXCEPTIONS.replace("{when}", when))
    with pytest.raises(PythonLayerError) as info:
        Registry().load_python(path)
    assert raised in str(info.value) and info.value.user_code
    model = chain_model(tmp_path / "m.onnx", "Softsign")
    assert main(["run", "-m", str(model), "-l", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:") and raised in err and "customlayers/" not in err


def test_a_base_exception_in_output_shapes_and_execute_names_the_layer(tmp_path, engine,
                                                                        capsys):
    path = write(tmp_path, "layers.py", BASE_EXCEPTIONS.replace("{when}", "shapes"))
    model = chain_model(tmp_path / "m.onnx", "Softsign")
    registry = Registry(engine)
    registry.load_python(path)
    with pytest.raises(PythonLayerError) as info:
        Network(model, registry, engine)
    assert "Softsign.output_shapes" in str(info.value) and \
        "raised Abort: in output_shapes" in str(info.value)
    assert main(["run", "-m", str(model), "-l", str(path)]) == 1
    assert "raised Abort: in output_shapes" in capsys.readouterr().err
    path = write(tmp_path, "run.py", BASE_EXCEPTIONS.replace("{when}", "execute"))
    registry = Registry(engine)
    registry.load_python(path)
    with pytest.raises(ExecutionError) as info:
        Network(model, registry, engine).infer({"x": rand()})
    assert "Softsign.execute" in str(info.value) and "raised Abort: in execute" in str(info.value)


def test_a_stream_item_whose_run_fails_keeps_its_own_error(tmp_path, engine):
    """Item 1's Python layer raises while item 4 is being started (4 in flight): the error is
    item 1's, with no "item 4 of the stream" put on it, and item 0 came out before it (the
    stream's bad-item handling named the item being started for an earlier item's failure)."""
    text = SOFTSIGN.replace(
        'np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])',
        'if inputs[0].max() > 50: raise ValueError("too large")\n'
        '        np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])')
    registry = Registry(engine)
    registry.load_python(write(tmp_path, "layers.py", text))
    net = Network(chain_model(tmp_path / "m.onnx", "Softsign"), registry, engine)
    xs = [rand(seed=i) for i in range(8)]
    xs[1] = xs[1] + 100.0
    got = []
    with pytest.raises(ExecutionError, match="raised ValueError: too large") as info:
        for outs in net.stream(xs, nireq=4):
            got.append(outs)
    assert len(got) == 1 and "of the stream" not in str(info.value)
