"""The runtime's MVCL adapter (runtime/layers/mvcl.py, mvcl_build.py) and the one-layer path
(runtime/compile/one_layer.py): internal buffers planned like any tensor, stages profiled, constant
blobs bound by name, output shapes from the model, and every failure a located error (the
layer, the place in the descriptor or the .cl, a stable code)."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from customlayers.cli import main
from customlayers.api import run_layer
from customlayers.errors import BindingError, ModelError
from model_files import write_ir, write_onnx

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "layers"
MVN = EXAMPLES / "mvn_two_stage" / "mvn_two_stage.xml"
REORG = EXAMPLES / "reorg_nhwc" / "reorg_nhwc.xml"
WHERE = EXAMPLES / "activation_where" / "activation_where.xml"

SCALE_CL = """\
__kernel void scale_by_channel(__global const float* src, __global float* dst,
                               __global const float* weights, int plane)
{
    const int i = get_global_id(0);
    const int f = get_global_id(1);
    const int b = get_global_id(2);
    const int F = get_global_size(1);
    dst[(b * F + f) * plane + i] = src[(b * F + f) * plane + i] * weights[f];
}
"""
SCALE_XML = """\
<CustomLayer name="ChannelScale" type="MVCL" version="1">
    <Kernel entry="scale_by_channel"><Source filename="scale.cl"/></Kernel>
    <Parameters>
        <Tensor arg-name="src" type="input" port-index="0" format="BFYX"/>
        <Tensor arg-name="dst" type="output" port-index="0" format="BFYX"/>
        <Data arg-name="weights" type="data" source="weights" format="BFYX"/>
        <Scalar arg-name="plane" type="int" source="plane"/>
    </Parameters>
    <WorkSizes dim="input,0" global="Y*X,F,B"/>
</CustomLayer>
"""
HALF_CL = """\
// a VPU kernel in half, as the seed's were
__kernel void twice(__global const float* src, __global float* dst)
{
    const int i = get_global_id(0);
    half v = (half)src[i];
    dst[i] = (float)(v * (half)2);
}
"""
BROKEN_CL = """\
__kernel void broken(__global const float* src, __global float* dst)
{
    const int i = get_global_id(0);
    dst[i] = src[i] * not_declared;
}
"""
ONE_KERNEL_XML = """\
<CustomLayer name="{name}" type="MVCL" version="1">
    <Kernel entry="{entry}"><Source filename="{file}"/></Kernel>
    <Parameters>
        <Tensor arg-name="src" type="input" port-index="0" format="BFYX"/>
        <Tensor arg-name="dst" type="output" port-index="0" format="BFYX"/>
    </Parameters>
    <WorkSizes dim="input,0" global="B*F*Y*X,1,1"/>
</CustomLayer>
"""


@pytest.fixture()
def registry(test_device):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    return Registry(Engine(test_device))


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _mvn(x, eps):
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(axis=(2, 3), keepdims=True)
    return (centered / np.sqrt(x64.var(axis=(2, 3), keepdims=True) + eps)).astype(np.float32)


def test_internal_buffers_are_planned_and_each_stage_is_profiled(registry):
    from customlayers.runtime.observe import profile
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.compile.one_layer import one_layer_graph
    registry.load(MVN)
    x = _x(2, 4, 3, 7)
    graph = one_layer_graph("MVN", [x], {}, [x.shape], {"normalize_variance": "1", "eps": "1e-9"})
    net = Network(graph, registry, registry.engine, profiling=True)
    plan = net.plan
    assert [s.name for s in plan.steps] == ["MVN/stage0", "MVN/stage1"]
    buffers = {k: plan.descs[k] for k in plan.memory.slot_of if k[0] == "temp"}
    # the two statistics buffers (B*F floats each), placed by the memory planner
    assert sorted(k[2] for k in buffers) == [("buffer", 0), ("buffer", 1)]
    assert all(d.nbytes == 2 * 4 * 4 for d in buffers.values())
    request = net.create_request()
    out = request.infer({"input0": x})["output0"]
    np.testing.assert_allclose(out, _mvn(x, 1e-9), rtol=1e-5, atol=1e-5)
    rows = profile.collect(request)
    assert [(r.name, r.impl, r.entry) for r in rows] == [
        ("MVN/stage0", "custom", "mvn_statistics"), ("MVN/stage1", "custom", "mvn_normalize")]


def test_a_constant_blob_binds_by_name(registry):
    registry.load_string(SCALE_XML, {"scale.cl": SCALE_CL})
    x, w = _x(2, 3, 4, 5), _x(3, seed=1)
    (got,) = run_layer(registry, "ChannelScale", [x], {"plane": "20"}, {"weights": w},
                                [x.shape])
    np.testing.assert_allclose(got, x * w.reshape(1, 3, 1, 1), rtol=1e-6)
    with pytest.raises(BindingError, match="binds Data weights, but the node has no constant "
                                           "input of that name, nor one after its 1 real "
                                           "input"):
        run_layer(registry, "ChannelScale", [x], {"plane": "20"}, {}, [x.shape])


def test_the_declared_layout_is_reached_by_reorders(registry):
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.compile.one_layer import one_layer_graph
    registry.load(REORG)
    x = _x(1, 4, 6, 10)
    net = Network(one_layer_graph("ReorgYoloNHWC", [x], {}, [(1, 16, 3, 5)], {"stride": "2"}),
                  registry, registry.engine)
    steps = net.plan.steps
    assert [s.impl for s in steps] == ["reorder", "custom", "reorder"]
    assert steps[1].input_descs[0].format == "BYXF" and not steps[1].input_descs[0].is_padded
    assert steps[2].output_descs[0].is_plain


def test_half_arithmetic_without_cl_khr_fp16_is_refused_before_building(registry, tmp_path,
                                                                        capsys):
    if "cl_khr_fp16" in registry.engine.device.extensions.split():
        pytest.skip("the test device has cl_khr_fp16: it builds half kernels")
    (tmp_path / "half.cl").write_text(HALF_CL)
    xml = tmp_path / "half.xml"
    xml.write_text(ONE_KERNEL_XML.format(name="Twice", entry="twice", file="half.cl"))
    registry.load(xml)
    with pytest.raises(BindingError) as caught:
        run_layer(registry, "Twice", [_x(1, 2, 3, 4)], {}, {}, [(1, 2, 3, 4)])
    e = caught.value
    device = registry.engine.device.name.strip()
    assert e.code == "CL118" and e.layer == "Twice"
    assert (e.location.line, e.location.column) == (5, 5)       # the first `half`
    assert f"device '{device}' does not have it" in str(e) and "cl_khr_fp16" in str(e)
    assert main(["validate", "--compile", str(xml)]) == 1
    out = capsys.readouterr().out
    assert f"half.cl:5:5: error[CL118]: MVCL layer 'Twice' stage 0:" in out


def test_a_build_error_is_reported_at_the_users_cl_line(tmp_path, capsys):
    (tmp_path / "broken.cl").write_text(BROKEN_CL)
    xml = tmp_path / "broken.xml"
    xml.write_text(ONE_KERNEL_XML.format(name="Broken", entry="broken", file="broken.cl"))
    assert main(["validate", "--compile", str(xml)]) == 1
    out = capsys.readouterr().out
    # the line is the user's; the message and column are the device compiler's own
    assert re.search(r"/broken\.cl:4:\d+: error\[CL080\]: .*'not_declared'.* \(layer Broken\)",
                     out), out


def test_validate_compile_builds_every_mvcl_variant(capsys):
    configs = [str(p) for p in sorted(EXAMPLES.glob("*/*.xml"))]
    assert main(["validate", "--compile", *configs]) == 0
    out = capsys.readouterr().out
    # errors none; a compiler may warn on its first build of a kernel (NVIDIA's does, before
    # its own cache has the program), which validate reports as CL082 warnings
    assert "CL116" not in out and "error[" not in out
    assert re.search(r"files?, \d+ layers?: 0 errors, \d+ warnings?$", out.strip()), out
    # a --param that selects one variant: the other two are not built, and say so
    assert main(["validate", "--compile", str(WHERE), "--param", "mode=relu"]) == 0
    out = capsys.readouterr().out
    assert out.count("info[CL117]") == 2
    assert 'activation_where.xml:16:1: info[CL117]: the variant <Where mode="leaky"> is not ' \
           'built: the attributes given (--param mode=relu) do not select it' in out


def test_no_matching_variant_in_a_network_is_a_located_error(registry):
    registry.load(WHERE)
    with pytest.raises(BindingError) as caught:
        run_layer(registry, "SelectActivation", [_x(1, 2, 3, 4)], {"mode": "gelu"}, {},
                           [(1, 2, 3, 4)])
    e = caught.value
    assert e.code == "CL081" and e.location.file.endswith("activation_where.xml")
    assert "mode is 'gelu', not 'relu'" in str(e) and "not 'clamp'" in str(e)


def test_an_output_shape_the_model_does_not_give_is_an_error(registry, tmp_path):
    from customlayers.runtime.compile.network import Network
    registry.load(REORG)
    x = _x(1, 4, 6, 10)
    # an IR with dynamic output dims: the known ones (F=16) do not fit input 0's shape
    path = write_ir(tmp_path / "m.xml", "ReorgYoloNHWC", [x],
                    [SimpleNamespace(shape=(1, 16, -1, -1))], {"stride": "2"})
    with pytest.raises(ModelError, match=r"layer 'custom' \(type ReorgYoloNHWC\).*: output 0 is "
                                         r"declared as \[1, 16, \?, \?\] in the model; an MVCL "
                                         r"layer has no shape formula"):
        Network(path, registry, registry.engine)
    with pytest.raises(BindingError, match="is an MVCL layer, which has no shape formula: give "
                                           "the shape of each of its 1 output"):
        run_layer(registry, "ReorgYoloNHWC", [x], {"stride": "2"})


def test_an_onnx_node_without_value_info_takes_input_0s_shape(registry, tmp_path):
    from customlayers.runtime.compile.network import Network
    registry.load(MVN)
    x = _x(1, 3, 4, 5)
    params = {"normalize_variance": "1", "eps": "0.001"}
    path = write_onnx(tmp_path / "m.onnx", "MVN", [x], [x], params, declare_outputs=False)
    out = Network(path, registry, registry.engine).infer({"x0": x})["y0"]
    np.testing.assert_allclose(out, _mvn(x, 0.001), rtol=1e-5, atol=1e-5)


def test_bind_points_mvcl_layers_to_run_layer(registry):
    registry.load(MVN)
    from customlayers.jit.tensor import TensorDesc
    with pytest.raises(BindingError, match="bind takes SimpleGPU layers .*run it alone with "
                                           "run_layer"):
        registry.bind("MVN", [TensorDesc((1, 2, 3, 4))])


def test_run_layer_command_runs_an_mvcl_layer(tmp_path, capsys):
    x = _x(1, 8, 6, 6)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    args = ["run-layer", "-c", str(REORG), "--layer", "ReorgYoloNHWC", "-i",
            str(tmp_path / "x.npy"), "--param", "stride=2", "-o", str(out)]
    assert main(args) == 2
    assert "give the shape of each of its 1 output(s) with --output-shape" in \
        capsys.readouterr().err
    assert main(args + ["--output-shape", "1x32x3x3"]) == 0
    assert "ReorgYoloNHWC on " in capsys.readouterr().out
    import importlib.util
    spec = importlib.util.spec_from_file_location("reorg_ref", REORG.parent / "reference.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    np.testing.assert_array_equal(np.load(out), ref.reference([x], {"stride": "2"}, {})[0])


def test_run_layer_runs_a_simplegpu_layer_with_data_blobs_too(registry):
    registry.load(EXAMPLES / "scale_shift" / "scale_shift.xml")
    x, w, b = _x(2, 5, 3, 3), _x(5, seed=1), _x(5, seed=2)
    (got,) = run_layer(registry, "ScaleShift", [x], {}, {"weights": w, "biases": b})
    np.testing.assert_allclose(got, x * w.reshape(1, 5, 1, 1) + b.reshape(1, 5, 1, 1),
                               rtol=1e-6, atol=1e-6)


def test_run_layer_checks_an_mvcl_layers_stages(tmp_path, capsys):
    """run-layer --check-bounds (and --sanitize where Oclgrind is) check each stage of an MVCL
    layer through its one-layer network, as `run` checks a model's (they were refused, exit
    2); validate --compile still warns that it builds the stages without checking them
    (CL119), never a silent pass."""
    from customlayers.runtime.checks.sanitize import find_oclgrind
    x = tmp_path / "x.npy"
    np.save(x, _x(1, 4, 6, 6))
    plain = tmp_path / "plain.npy"
    assert main(["run-layer", "-c", str(REORG), "--layer", "ReorgYoloNHWC", "-i", str(x),
                 "--param", "stride=2", "--output-shape", "1x16x3x3", "-o", str(plain)]) == 0
    flags = ["--check-bounds"] + (["--sanitize"] if find_oclgrind() else [])
    for flag in flags:
        checked = tmp_path / f"y{flag}.npy"
        code = main(["run-layer", "-c", str(REORG), "--layer", "ReorgYoloNHWC", "-i", str(x),
                     "--param", "stride=2", "--output-shape", "1x16x3x3", "-o", str(checked),
                     flag])
        err = capsys.readouterr().err
        assert code == 0, err
        np.testing.assert_array_equal(np.load(checked), np.load(plain))
    code = main(["validate", "--compile", "--check-bounds", str(REORG), "--param", "stride=2"])
    out = capsys.readouterr().out
    assert "warning[CL119]" in out and "ReorgYoloNHWC" in out, out


def test_a_parameter_no_mvcl_variant_reads_is_refused_with_a_suggestion(tmp_path, capsys,
                                                                        registry):
    """`--param strdie=2` for `stride` would run the default: refused, naming what it uses."""
    x = tmp_path / "x.npy"
    np.save(x, _x(1, 4, 6, 6))
    code = main(["run-layer", "-c", str(REORG), "--layer", "ReorgYoloNHWC", "-i", str(x),
                 "--param", "stride=2", "--param", "strdie=3", "--output-shape", "1x16x3x3",
                 "-o", str(tmp_path / "y.npy")])
    err = capsys.readouterr().err
    assert code == 2 and "'strdie' (did you mean 'stride'?)" in err, err
    registry.load(REORG)
    with pytest.raises(BindingError, match="does not use the parameter 'strdie'"):
        run_layer(registry, "ReorgYoloNHWC", [_x(1, 4, 6, 6)], {"stride": "2", "strdie": "3"},
                  {}, [(1, 16, 3, 3)])
    # the attributes the layer does read all pass
    (got,) = run_layer(registry, "ReorgYoloNHWC", [_x(1, 4, 6, 6)], {"stride": "2"}, {},
                       [(1, 16, 3, 3)])
    assert got.shape == (1, 16, 3, 3)
