"""Issue 8, class 1: inputs that used to give a silently wrong number now give an error or the
right number, through the public surface (API and CLI)."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from customlayers.cli import main  # noqa: E402
from customlayers.errors import BindingError, UnsupportedLayersError  # noqa: E402
from customlayers.api import run_layer  # noqa: E402
from customlayers.jit.tensor import TensorDesc  # noqa: E402

COPY_LAYER = """<CustomLayer name="Copy" type="SimpleGPU" version="1">
  <Kernel entry="copy_kernel">
    <Source filename="copy.cl"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="{src}" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-index="{dst}" type="output" port-index="0" format="BFYX"/>
  </Buffers>
</CustomLayer>
"""
COPY_CL = """__kernel void copy_kernel(const __global float* src, __global float* dst)
{
    const uint i = get_global_id(0);
    dst[i] = src[i];
}
"""


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _registry(engine, xml, sources):
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(engine)
    registry.load_string(xml, sources, name="layer.xml")
    return registry


# -- an output bound to a const parameter -------------------------------------------------------
def test_swapped_arg_index_is_refused_when_binding(engine):
    registry = _registry(engine, COPY_LAYER.format(src=1, dst=0), {"copy.cl": COPY_CL})
    with pytest.raises(BindingError, match=r"binds output port 0 to argument 0 'src' of kernel "
                                           r"'copy_kernel', which is declared '__global const "
                                           r"float\*': the kernel cannot write through a const "
                                           r"pointer \(are the arg-index of an input and an "
                                           r"output swapped\?\)"):
        registry.bind("Copy", [TensorDesc((1, 2, 3, 4))])
    good = _registry(engine, COPY_LAYER.format(src=0, dst=1), {"copy.cl": COPY_CL})
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.testing.assert_array_equal(good.bind("Copy", [TensorDesc(x.shape)])(x), x)


def test_swapped_arg_index_is_reported_by_validate_compile(tmp_path, capsys):
    (tmp_path / "copy.cl").write_text(COPY_CL)
    (tmp_path / "layer.xml").write_text(COPY_LAYER.format(src=1, dst=0))
    assert main(["validate", str(tmp_path / "layer.xml")]) == 0     # the config alone is fine
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "layer.xml"), "--compile", "-d", "CPU"]) == 1
    out = capsys.readouterr().out
    # at the output's <Tensor> element, line 7
    assert f"{tmp_path / 'layer.xml'}:7:5: error[CL084]" in out
    assert "cannot write through a const pointer" in out


def test_half_kernel_on_a_device_without_fp16_is_refused_before_building(engine):
    if "cl_khr_fp16" in engine.device.extensions.split():
        pytest.skip("the test device has fp16")
    half_cl = COPY_CL.replace("__kernel", "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
                                          "__kernel").replace("dst[i] = src[i];",
                                                              "half h = (half)src[i];\n"
                                                              "    dst[i] = (float)h;")
    registry = _registry(engine, COPY_LAYER.format(src=0, dst=1), {"copy.cl": half_cl})
    with pytest.raises(BindingError, match=r"its sources use the half type, which needs half "
                                           r"precision \(cl_khr_fp16\); device .* has none"):
        registry.bind("Copy", [TensorDesc((1, 2, 3, 4))])


def test_the_word_half_in_a_comment_is_not_half_arithmetic(engine):
    commented = "// the second half of the tensor is copied too\n" + COPY_CL
    registry = _registry(engine, COPY_LAYER.format(src=0, dst=1), {"copy.cl": commented})
    x = np.ones((1, 1, 2, 2), np.float32)
    np.testing.assert_array_equal(registry.bind("Copy", [TensorDesc(x.shape)])(x), x)


# -- a node of a custom domain never runs the same-named built-in ------------------------------
def _swish_model(path: Path) -> Path:
    node = helper.make_node("Swish", ["x"], ["y"], domain="com.example", beta=1.5)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(path))
    return path


def test_custom_domain_node_without_a_layer_is_unsupported(tmp_path, engine, capsys):
    from customlayers.runtime.compile.network import Network
    model = _swish_model(tmp_path / "swish.onnx")
    with pytest.raises(UnsupportedLayersError) as e:
        Network(model, engine=engine)
    assert e.value.layers == [("y", "Swish", "com.example")] or \
        [t[1:] for t in e.value.layers] == [("Swish", "com.example")]
    assert "never the built-in of the same name" in str(e.value)
    code = main(["run", "-m", str(model), "-d", "CPU"])
    captured = capsys.readouterr()
    assert code != 0 and "Swish" in captured.err and "Traceback" not in captured.err


# -- several threads share one Network ------------------------------------------------------
def test_infer_from_many_threads_returns_each_thread_its_own_result(engine, tmp_path):
    from customlayers.runtime.compile.network import Network
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "relu.onnx"))
    net = Network(tmp_path / "relu.onnx", engine=engine)
    wrong: list = []
    failures: list = []

    def worker(k: int) -> None:
        try:
            for run in range(50):
                x = np.full(64, k * 1000 + run, np.float32)
                got = (net.infer({"x": x}) if run % 2 else net.infer_async({"x": x}).wait())["y"]
                if not np.array_equal(got, x):
                    wrong.append((k, run, float(got[0])))
        except Exception as e:              # noqa: BLE001 - reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures and not wrong, (failures[:3], wrong[:5])


# -- an IR layer with the wrong number of inputs ----------------------------------------------
IR_TWO_INPUT_RELU = """<?xml version="1.0"?>
<net name="arity" version="11">
  <layers>
    <layer id="0" name="x" type="Parameter" version="opset1">
      <data shape="1,4" element_type="f32"/>
      <output><port id="0" precision="FP32"><dim>1</dim><dim>4</dim></port></output>
    </layer>
    <layer id="1" name="relu" type="ReLU" version="opset1">
      <input>
        <port id="0" precision="FP32"><dim>1</dim><dim>4</dim></port>
        <port id="1" precision="FP32"><dim>1</dim><dim>4</dim></port>
      </input>
      <output><port id="2" precision="FP32"><dim>1</dim><dim>4</dim></port></output>
    </layer>
    <layer id="2" name="out" type="Result" version="opset1">
      <input><port id="0" precision="FP32"><dim>1</dim><dim>4</dim></port></input>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
    <edge from-layer="0" from-port="0" to-layer="1" to-port="1"/>
    <edge from-layer="1" from-port="2" to-layer="2" to-port="0"/>
  </edges>
</net>
"""


def test_a_layer_with_the_wrong_number_of_inputs_is_named(tmp_path, engine, capsys):
    """A ReLU given two inputs used to ignore the second; a MatMul given one raised
    IndexError. Every built-in declares how many inputs it takes."""
    from customlayers.errors import ModelError
    from customlayers.runtime.compile.network import Network
    model = tmp_path / "arity.xml"
    model.write_text(IR_TWO_INPUT_RELU)
    with pytest.raises(ModelError, match=r"layer 'relu' \(type ReLU\).*a ReLU layer takes 1 "
                                         r"input, the model gives it 2"):
        Network(model, engine=engine)
    model.write_text(IR_TWO_INPUT_RELU.replace('type="ReLU"', 'type="MatMul"').replace(
        '<port id="1" precision="FP32"><dim>1</dim><dim>4</dim></port>\n      </input>',
        '</input>').replace('<edge from-layer="0" from-port="0" to-layer="1" to-port="1"/>', ""))
    assert main(["run", "-m", str(model), "-d", "CPU"]) == 1
    err = capsys.readouterr().err
    assert "a MatMul layer takes 2 inputs, the model gives it 1" in err and "Traceback" not in err


def test_a_tensor_over_the_device_limit_is_refused_before_allocating(tmp_path, engine):
    """Issue 8, classes 3 and 5: create_request raised pyopencl's LogicError (and PoCL can
    abort the process on an allocation it cannot make)."""
    from customlayers.errors import DeviceError
    from customlayers.runtime.compile.network import Network
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1024])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(tmp_path / "relu.onnx"))
    net = Network(tmp_path / "relu.onnx", engine=engine)
    from customlayers.errors import BindingError
    rows = int(engine.device.max_mem_alloc_size) // 4096 + 1        # one row over the limit
    if rows * 1024 < 2 ** 32:
        with pytest.raises(DeviceError, match=r"needs .* MiB in one buffer, but device .* "
                                              r"allocates at most .* MiB per buffer"):
            net.create_request({"x": (rows, 1024)})
    else:       # a device that allocates more than the built-ins' 32-bit indices reach (H200)
        with pytest.raises(BindingError, match=r"a result of \d+ elements does not fit the "
                                               r"32-bit indices of the built-in kernels"):
            net.create_request({"x": (rows, 1024)})
    assert net.infer({"x": np.ones((2, 1024), np.float32)})["y"].shape == (2, 1024)


# -- a model attribute the layer does not read ------------------------------------------------
def test_a_misspelled_model_attribute_is_a_warning_naming_the_one_meant(tmp_path, capsys):
    """The node says negative_slop=0.5; the descriptor reads negative_slope, which the node
    does not give: the layer runs with the default, and the user hears why."""
    node = helper.make_node("ReLU", ["x"], ["y"], domain="com.example", negative_slop=0.5)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                       helper.make_opsetid("com.example", 1)]),
              str(tmp_path / "typo.onnx"))
    relu = Path(__file__).resolve().parents[2] / "examples" / "layers" / "relu" / "relu.xml"
    assert main(["run", "-m", str(tmp_path / "typo.onnx"), "-c", str(relu), "-d", "CPU"]) == 0
    err = capsys.readouterr().err
    assert ("attribute 'negative_slop' is not read by layer 'ReLU'" in err
            and "did you mean 'negative_slope'?" in err)


def test_bind_refuses_a_parameter_no_define_reads(engine):
    registry = _registry(engine, COPY_LAYER.format(src=0, dst=1), {"copy.cl": COPY_CL})
    with pytest.raises(BindingError, match=r"does not use the parameter 'scale'"):
        registry.bind("Copy", [TensorDesc((1, 2, 3, 4))], params={"scale": "2"})
    with pytest.raises(BindingError, match=r"does not use the parameter 'scale'"):
        run_layer(registry, "Copy", [np.ones((1, 2, 3, 4), np.float32)], {"scale": "2"})


def test_a_missing_config_is_a_project_error_and_an_os_error(engine):
    from customlayers.errors import ConfigError, CustomLayersError
    from customlayers.runtime.layers.registry import Registry
    with pytest.raises(CustomLayersError) as e:
        Registry(engine).load("no/such/config.xml")
    assert isinstance(e.value, ConfigError) and isinstance(e.value, OSError)
    assert str(e.value) == "cannot read the config no/such/config.xml: No such file or directory"


def _reorg_model(tmp_path, declare: bool, nodes: int = 1):
    """ReorgYolo (stride 2) nodes on [1, 4, 8, 8], then a mean over the spatial axes: the
    custom node's output is [1, 16, 4, 4], which only a value_info (or a shape formula) says."""
    made = [helper.make_node("ReorgYolo", ["x"], ["r0"], domain="custom", name="r0",
                             stride=2)]
    made += [helper.make_node("ReorgYolo", ["x"], [f"r{k}"], domain="custom", name=f"r{k}",
                              stride=2) for k in range(1, nodes)]
    made += [helper.make_node("ReduceMean", [f"r{k}"], [f"z{k}"], axes=[2, 3], keepdims=0)
             for k in range(nodes)]
    info = [helper.make_tensor_value_info(f"r{k}", TensorProto.FLOAT, [1, 16, 4, 4])
            for k in range(nodes)] if declare else []
    graph = helper.make_graph(
        made, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info(f"z{k}", TensorProto.FLOAT, None) for k in range(nodes)],
        value_info=info)
    path = tmp_path / f"reorg_{int(declare)}_{nodes}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("custom", 1)]),
              str(path))
    return str(path)


def test_a_custom_output_shaped_by_guess_is_said(tmp_path, capsys, examples_dir):
    """Without a value_info or a shape formula, a custom node's output takes input 0's shape:
    right for an elementwise layer, wrong for ReorgYolo ([1, 4] out instead of [1, 16]). `run`
    says so, once per layer type, and not when the model declares the shape."""
    reorg = str(examples_dir / "reorg" / "reorg.xml")
    assert main(["run", "-m", _reorg_model(tmp_path, False, nodes=2), "-c", reorg]) == 0
    err = capsys.readouterr().err
    assert err.count("note: node ") == 1
    assert ("note: node 'r0' (ReorgYolo): output 0 takes input 0's shape [1, 4, 8, 8]: the model "
            "declares no shape for it and layer 'ReorgYolo' has no shape formula (" in err)
    assert "one note for all ReorgYolo nodes" in err
    assert main(["run", "-m", _reorg_model(tmp_path, True), "-c", reorg]) == 0
    captured = capsys.readouterr()
    assert "note: node" not in captured.err and "z0: shape [1, 16]" in captured.out
