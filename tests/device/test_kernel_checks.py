"""Issue 8, class 2: kernels and models that disagree about shapes are found by --check-bounds
(guard zones, NaN-prefilled outputs) and --sanitize (Oclgrind), in run-layer and
validate --compile, at the layer, the tensor and the user's .cl line."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from customlayers.cli import main
from customlayers.runtime.checks.sanitize import find_oclgrind

# make test's set-up installs Debian's oclgrind; a machine without it (the GPU machine, which
# has no network) skips the --sanitize tests
needs_oclgrind = pytest.mark.skipif(find_oclgrind() is None, reason="Oclgrind is not installed")

ROOT = Path(__file__).resolve().parents[2]
REORG = ROOT / "examples" / "layers" / "reorg" / "reorg.xml"

LAYER = """<CustomLayer name="Shift" type="SimpleGPU" version="1">
  <Kernel entry="shift">
    <Source filename="shift.cl"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="{fmt}"/>
    <Tensor arg-index="1" type="output" port-index="0" format="{fmt}"/>
  </Buffers>
  <WorkSizes global="{count}" dim="{dim}"/>
</CustomLayer>
"""
KERNEL = """__kernel void shift(__global const float* src, __global float* dst)
{{
    const int i = get_global_id(0);
    {body}
}}
"""
COPY = "dst[i] = src[i];"


def _layer(tmp_path: Path, body: str, count: str = "B*F*Y*X", fmt: str = "BFYX",
           dim: str = "output") -> Path:
    (tmp_path / "shift.cl").write_text(KERNEL.format(body=body))
    config = tmp_path / "shift.xml"
    config.write_text(LAYER.format(count=count, fmt=fmt, dim=dim))
    return config


def _input(tmp_path: Path, shape=(1, 2, 3, 4)) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    return path


def _run_layer(capsys, tmp_path, config, layer, *extra):
    out = tmp_path / "out.npy"
    code = main(["run-layer", "-c", str(config), "--layer", layer, "-i",
                 str(_input(tmp_path)), "-o", str(out), "-d", "CPU", *extra])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured, out


@needs_oclgrind
def test_a_correct_kernel_passes_both_checks_and_writes_its_output(tmp_path, capsys):
    config = _layer(tmp_path, COPY)
    code, captured, out = _run_layer(capsys, tmp_path, config, "Shift", "--check-bounds",
                                     "--sanitize")
    assert code == 0, captured.err
    np.testing.assert_array_equal(np.load(out), np.load(tmp_path / "x.npy"))


def test_a_write_past_the_end_is_named_with_its_offset(tmp_path, capsys):
    config = _layer(tmp_path, "dst[i + 1] = src[i];")
    code, captured, out = _run_layer(capsys, tmp_path, config, "Shift", "--check-bounds")
    assert code == 1 and not out.exists()
    assert ("error: layer 'Shift': output 0: the kernel wrote past the end of the buffer (24 "
            "elements, 1x2x3x4 f32 bfyx): the first out-of-bounds write is at element offset 24"
            in captured.err)
    # and element 0 is never written (with the launch's work sizes: a <WorkSizes> that covers
    # too little is the usual cause)
    assert "1 of 24 elements were never written; the first at B,F,Y,X = 0,0,0,0 (work sizes: " \
           "global [" in captured.err


def test_a_write_before_the_start_and_into_the_input(tmp_path, capsys):
    config = _layer(tmp_path, "dst[i - 1] = src[i]; if (i == 0) ((__global float*)src)[3] = 0;")
    code, captured, _ = _run_layer(capsys, tmp_path, config, "Shift", "--check-bounds")
    assert code == 1
    assert "output 0: the kernel wrote before the buffer's first element: the first byte " \
           "changed is at element offset -1" in captured.err
    assert "input 0: the kernel wrote into this input (first changed element at buffer " \
           "offset 3)" in captured.err


def test_reorg_with_a_stride_its_shapes_do_not_allow(tmp_path, capsys):
    """The example ReorgYolo with stride=3 on 8 channels printed garbage with exit 0."""
    code, captured, out = _run_layer(capsys, tmp_path, REORG, "ReorgYolo", "--param",
                                     "stride=3", "--check-bounds")
    assert code == 1 and not out.exists()
    assert "layer 'ReorgYolo': output 0: 24 of 24 elements were never written" in captured.err


def test_a_nan_in_the_input_is_named_not_blamed_on_the_kernel(tmp_path, capsys):
    """A NaN in the user's .npy, copied through: the warning names the input that holds it, and
    suggests no kernel check (it suggested --check-bounds, as for a kernel bug)."""
    config = _layer(tmp_path, COPY)
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 4)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    np.save(tmp_path / "nan.npy", x)
    out = tmp_path / "out.npy"
    code = main(["run-layer", "-c", str(config), "--layer", "Shift", "-i",
                 str(tmp_path / "nan.npy"), "-o", str(out), "-d", "CPU"])
    err = capsys.readouterr().err
    assert code == 0 and np.isnan(np.load(out)).sum() == 1
    assert "output 'output0' has 1 non-finite value(s); input 'input0' holds 1 (NaN or " \
           "infinity), passed on" in err and "--check-bounds" not in err, err


def test_without_checks_a_non_finite_output_suggests_them(tmp_path, capsys):
    config = _layer(tmp_path, "dst[i] = i < 2 ? src[i] / 0.0f : src[i];")
    code, captured, _ = _run_layer(capsys, tmp_path, config, "Shift")
    assert code == 0
    assert "has 2 non-finite value(s); if a custom kernel may read or write out of bounds, run " \
           "again with --check-bounds or --sanitize" in captured.err


def test_without_checks_outputs_never_written_are_an_error_not_a_file(tmp_path, capsys):
    """Stride 3 on 2 channels: the guard skips every work-item. Without --check-bounds this
    wrote the output buffer's old memory with exit 0."""
    code, captured, out = _run_layer(capsys, tmp_path, REORG, "ReorgYolo", "--param",
                                     "stride=3")
    assert code == 1 and not out.exists()
    assert ("output 0 (1x2x3x4 f32 bfyx): 24 of 24 elements were never written by the kernel, "
            "the first at index (0, 0, 0, 0). Either the kernel writes another shape (the layer "
            "has no shape formula for it, so its shape is the one given to bind (run-layer's "
            "--output-shape), else input 0's): give the shape it writes; or its work sizes "
            "([8, 3, 2]) or its guards skip elements"
            in captured.err)
    # where the shape came from is said before the run
    assert ("note: output 0 of layer 'ReorgYolo' runs with input 0's shape 1x2x3x4: the layer "
            "has no shape formula for it (" in captured.err)


ROUNDED_UP = "((B*F*Y*X+63)/64)*64"      # work sizes rounded up to the local size


def test_without_checks_a_write_past_the_end_is_an_error_not_a_crash(tmp_path, capsys):
    """A global size rounded up to 64 and a kernel with no `if (i < count)`: 40 floats past the
    output's end. Without --check-bounds this aborted the process in PoCL's free() ("double
    free or corruption", exit 134); on a GPU it changes whatever buffer lies there. (It reads
    within the input, so that every byte it writes past the end is known to differ.)"""
    config = _layer(tmp_path, "dst[i] = src[i % 24];", count=ROUNDED_UP)
    code, captured, out = _run_layer(capsys, tmp_path, config, "Shift")
    assert code == 1 and not out.exists() and "Traceback" not in captured.err
    assert (f"layer type 'Shift' ({config}:1:1): output 0 (1x2x3x4 f32 bfyx): the kernel wrote "
            f"past the end of the output: 160 of the 4096 bytes after it changed, the first at "
            f"element 24 of a buffer of 24 elements" in captured.err)
    assert (f"guard the writes in the kernel, or fix its <WorkSizes> ({config}:9:3; now [64])"
            in captured.err)
    assert "run again with --check-bounds or --sanitize" not in captured.err  # said already
    guarded = _layer(tmp_path, "if (i < 24) dst[i] = src[i];", count=ROUNDED_UP)
    code, captured, out = _run_layer(capsys, tmp_path, guarded, "Shift")
    assert code == 0, captured.err
    np.testing.assert_array_equal(np.load(out), np.load(tmp_path / "x.npy"))


def test_check_bounds_finds_a_copy_of_the_inputs_guard_past_the_outputs_end(tmp_path, capsys):
    """The same rounded-up copy under --check-bounds: the kernel copies the input's guard zone
    into the output's. Both zones held one byte, so the write changed nothing and was missed
    (run-layer and validate said nothing, exit 0); a written buffer's zone has a byte of its
    own."""
    config = _layer(tmp_path, COPY, count=ROUNDED_UP)
    code, captured, out = _run_layer(capsys, tmp_path, config, "Shift", "--check-bounds")
    assert code == 1 and not out.exists()
    assert ("layer 'Shift': output 0: the kernel wrote past the end of the buffer (24 elements, "
            "1x2x3x4 f32 bfyx): the first out-of-bounds write is at element offset 24 (160 bytes "
            "changed in the guard zone after it)" in captured.err)
    assert main(["validate", str(config), "--compile", "--check-bounds", "-d", "CPU",
                 "--shape", "Shift=1x3x5x7"]) == 1
    assert "output 0: the kernel wrote past the end of the buffer (105 elements" in \
        capsys.readouterr().out


def test_a_kernel_that_skips_elements_is_refused_by_the_numpy_call(tmp_path, test_device):
    from customlayers.errors import ExecutionError
    from customlayers.jit.tensor import TensorDesc
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(Engine(test_device))
    registry.load(str(_layer(tmp_path, "if (i % 5 != 3) dst[i] = src[i];")))
    bound = registry.bind("Shift", [TensorDesc((1, 2, 3, 4))])
    with pytest.raises(ExecutionError, match=r"output 0 \(1x2x3x4 f32 bfyx\): 5 of 24 elements "
                                             r"were never written by the kernel, the first at "
                                             r"index \(0, 0, 0, 3\)") as info:
        bound(np.ones((1, 2, 3, 4), np.float32))
    assert f"fix its <WorkSizes> ({tmp_path / 'shift.xml'}:9:" in str(info.value)
    from customlayers.errors import BindingError
    with pytest.raises(BindingError, match=r"layer type 'Shift': input 0 has shape \[1, 2, 3, "
                                           r"5\], but the kernel was bound for \[1, 2, 3, 4\]"):
        bound(np.ones((1, 2, 3, 5), np.float32))


@pytest.mark.parametrize("ctype,dtype,value", [
    ("float", np.float32, "as_float(0x7FE5A5A5u)"),     # the first run's sentinel, a NaN
    ("uchar", np.uint8, "0xA5"),
    ("int", np.int32, "(int)0xA5A5A5A5"),
], ids=["f32", "u8", "i32"])
def test_a_kernel_that_writes_the_sentinel_itself_is_not_refused(tmp_path, test_device, ctype,
                                                                 dtype, value):
    """The first run's sentinel is a value a kernel may compute (any uchar is): an element is
    unwritten only when it kept the second run's sentinel too."""
    from customlayers.jit.tensor import TensorDesc
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    (tmp_path / "shift.cl").write_text(
        f"__kernel void shift(__global const {ctype}* src, __global {ctype}* dst)\n"
        f"{{ const int i = get_global_id(0); dst[i] = i % 2 ? src[i] : {value}; }}\n")
    (tmp_path / "shift.xml").write_text(LAYER.format(count="B*F*Y*X", fmt="BFYX",
                                                     dim="output"))
    registry = Registry(Engine(test_device))
    registry.load(str(tmp_path / "shift.xml"))
    x = np.arange(24, dtype=dtype).reshape(1, 2, 3, 4)
    out = registry.bind("Shift", [TensorDesc(x.shape, x.dtype)])(x)
    bits = out.view(f"u{out.itemsize}").reshape(-1)
    expected = x.view(f"u{x.itemsize}").reshape(-1).copy()
    expected[::2] = np.array([0x7FE5A5A5 if ctype == "float" else 0xA5A5A5A5 if ctype == "int"
                              else 0xA5], expected.dtype)
    np.testing.assert_array_equal(bits, expected)


def test_run_layer_names_the_file_of_an_input_it_cannot_take(tmp_path, capsys, examples_dir):
    relu = str(examples_dir / "relu" / "relu.xml")
    np.save(tmp_path / "x5.npy", np.zeros((1, 1, 4, 6, 10), np.float32))
    assert main(["run-layer", "-c", relu, "-i", str(tmp_path / "x5.npy"),
                 "-o", str(tmp_path / "y.npy")]) == 1
    err = capsys.readouterr().err
    assert f"error: input 0 ({tmp_path / 'x5.npy'}): shape [1, 1, 4, 6, 10] has rank 5" in err
    np.save(tmp_path / "x0.npy", np.float32(-2))
    assert main(["run-layer", "-c", relu, "-i", str(tmp_path / "x0.npy"),
                 "-o", str(tmp_path / "y.npy")]) == 0
    assert ": wrote a 0-d array to " in capsys.readouterr().out
    assert np.load(tmp_path / "y.npy").shape == ()


@needs_oclgrind
def test_sanitize_reports_an_invalid_read_at_the_users_line(tmp_path, capsys):
    """stride=-1 made the ReorgYolo example segfault; on Oclgrind it is a located report and
    the kernel never runs natively."""
    code, captured, out = _run_layer(capsys, tmp_path, REORG, "ReorgYolo", "--param",
                                     "stride=-1", "--sanitize", "--check-bounds")
    assert code == 1 and not out.exists()
    assert f"{REORG.with_name('reorg.cl')}:34:9: layer 'ReorgYolo': invalid read of size 4 by " \
           in captured.err
    assert "input0[INPUT0_OFFSET + b * INPUT0_PITCHES[0]" in captured.err   # the user's line


@needs_oclgrind
def test_sanitize_finds_a_write_past_the_end(tmp_path, capsys):
    config = _layer(tmp_path, "dst[i + 1] = src[i];")
    code, captured, _ = _run_layer(capsys, tmp_path, config, "Shift", "--sanitize")
    assert code == 1
    assert f"{tmp_path / 'shift.cl'}:4:" in captured.err and "invalid write of size 4 by 1 " \
                                                             "work-item" in captured.err


@needs_oclgrind
def test_validate_compile_runs_both_checks(tmp_path, capsys):
    config = _layer(tmp_path, "dst[i + 1] = src[i];")
    assert main(["validate", str(config), "--compile", "-d", "CPU"]) == 0
    capsys.readouterr()
    assert main(["validate", str(config), "--compile", "--check-bounds", "-d", "CPU"]) == 1
    out = capsys.readouterr().out
    # at the <WorkSizes> (line 9), the usual fix, as the run-time message says
    assert f"{config}:9:3: error[CL086]: output 0: the kernel wrote past the end" in out
    assert main(["validate", str(config), "--compile", "--sanitize", "-d", "CPU"]) == 1
    out = capsys.readouterr().out
    assert f"{tmp_path / 'shift.cl'}:4:" in out and "error[CL087]: Oclgrind: invalid write" in out


def test_validate_check_bounds_says_unwritten_elements_at_the_work_sizes(tmp_path, capsys):
    """A global size of half the output: the elements never written are said at the
    <WorkSizes> line (they were said at the <CustomLayer>'s, 1:1)."""
    config = _layer(tmp_path, COPY, count="B*F*Y*X/2")
    assert main(["validate", str(config), "--compile", "--check-bounds", "-d", "CPU"]) == 1
    out = capsys.readouterr().out
    assert f"{config}:9:3: error[CL086]: output 0: 96 of 192 elements were never written" in out


def test_validate_compiles_an_int_kernel_for_int_inputs(tmp_path, capsys):
    """validate --compile takes the element type the kernel declares where --shape names none,
    as run-layer does (it described, and ran, an int kernel's inputs as f32)."""
    config = _layer(tmp_path, "dst[i + 1] = src[i];")
    (tmp_path / "shift.cl").write_text(KERNEL.format(body="dst[i + 1] = src[i];")
                                       .replace("float", "int"))
    for shape, shown in [([], "1x3x8x8 i32"), (["--shape", "Shift=1x2x3x4"], "1x2x3x4 i32"),
                         (["--shape", "Shift=1x2x3x4:f32"], "1x2x3x4 f32")]:
        assert main(["validate", str(config), "--compile", "--check-bounds", "-d", "CPU",
                     *shape]) == 1
        out = capsys.readouterr().out
        assert "the kernel wrote past the end of the buffer" in out, out
        assert f"(inputs {shown} bfyx)" in out, out


@pytest.mark.parametrize("fmt", ["BYXF", "YXFB"])
def test_unwritten_elements_are_located_in_logical_coordinates(tmp_path, fmt):
    """The first never-written element is reported as B,F,Y,X whatever the memory format."""
    from customlayers.api import Engine, Registry, TensorDesc, check_kernel_bounds
    config = _layer(tmp_path, "if (i != 5) dst[i] = src[i];", fmt="ANY")  # as it comes
    registry = Registry(Engine("CPU"))
    registry.load(config)
    desc = TensorDesc((1, 2, 3, 4), "f32", fmt)
    bound = registry.bind("Shift", [desc], [desc])
    x = np.ones((1, 2, 3, 4), np.float32)
    _, problems = check_kernel_bounds(bound, x)
    (problem,) = problems
    # the logical element that lives at buffer element 5 in this format
    packed = desc.pack(np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)).reshape(-1)
    where = np.unravel_index(int(packed[5]), (1, 2, 3, 4))
    assert (f"1 of 24 elements were never written; the first at B,F,Y,X = "
            f"{','.join(str(int(v)) for v in where)}") in str(problem)


def _custom_model(tmp_path: Path, ops=("Shift",), elem: str = "FLOAT",
                  name: str = "one.onnx") -> Path:
    """x -> the custom `ops` in a chain -> y, 1x2x3x4 tensors of ONNX type `elem` (the last
    output is the model's)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    names = ["x"] + [f"t{i}" for i in range(len(ops) - 1)] + ["y"]
    nodes = [helper.make_node(op, [a], [b], domain="com.example")
             for op, a, b in zip(ops, names, names[1:])]
    kind = getattr(TensorProto, elem)
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", kind, [1, 2, 3, 4])],
                              [helper.make_tensor_value_info("y", kind, [1, 2, 3, 4])])
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("com.example", 1)]),
              str(path))
    return path


def _model_with_custom_node(tmp_path: Path, out_shape) -> Path:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shift", ["r"], ["s"], domain="com.example"),
             helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        value_info=[helper.make_tensor_value_info("s", TensorProto.FLOAT, out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def test_run_checks_the_custom_layers_of_a_model(tmp_path, capsys):
    """The model declares the custom node's output smaller than what its kernel writes (the
    global size counts the input): the write past the end is found, on the input the layer
    really gets in the model, and nothing is written."""
    config = _layer(tmp_path, "dst[i] = src[i];", dim="input,0")
    model = _model_with_custom_node(tmp_path, [1, 2, 3, 2])
    out = tmp_path / "out.npz"
    code = main(["run", "-m", str(model), "-c", str(config), "-d", "CPU", "-o", str(out),
                 "--check-bounds"])
    captured = capsys.readouterr()
    assert code == 1 and not out.exists() and "Traceback" not in captured.err
    assert ("layer 's': output 0: the kernel wrote past the end of the buffer (12 elements, "
            "1x2x3x2 f32 bfyx): the first out-of-bounds write is at element offset 12"
            in captured.err)


def test_a_models_custom_layer_that_writes_past_its_output_is_an_error_without_flags(
        tmp_path, capsys, test_device):
    device = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")
    """The same model as above without --check-bounds: the first inference finds the write in
    the guard zone after the output's slot, where the next tensor could have been."""
    config = _layer(tmp_path, "dst[i] = src[i];", dim="input,0")
    model = _model_with_custom_node(tmp_path, [1, 2, 3, 2])
    out = tmp_path / "out.npz"
    code = main(["run", "-m", str(model), "-c", str(config), "-d", device, "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 1 and not out.exists() and "Traceback" not in captured.err
    assert (f"layer 's' (Shift, defined at {config}:1:1): output 0 (1x2x3x2 f32 bfyx): the "
            f"kernel wrote past the end of the output: 48 of the 4096 bytes after it changed, "
            f"the first at element 12 of a buffer of 12 elements" in captured.err)
    assert f"fix the layer's <WorkSizes> ({config}:9:" in captured.err
    from customlayers.api import Engine, Network
    from customlayers.errors import ExecutionError
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(Engine(test_device))
    registry.load(str(config))
    net = Network(model, registry, registry.engine)
    # the guard is the custom output's alone: the built-in Relus' tensors have none
    assert list(net.plan.memory.guards.values()) == [4096]
    request = net.create_request()
    for _ in range(2):
        with pytest.raises(ExecutionError, match="wrote past the end of the output"):
            request.infer({"x": np.ones((1, 2, 3, 4), np.float32)})


def test_a_custom_output_in_the_users_buffer_is_checked_where_the_tensor_lies(tmp_path,
                                                                              test_device):
    """A model output that a custom layer writes, bound to the user's own larger buffer: the
    first run's check fills and reads the tensor only, never the user's bytes after it (only
    the request's own slots have a guard zone)."""
    import pyopencl as cl
    from customlayers.api import Engine, Network
    from customlayers.runtime.layers.registry import Registry
    model = _custom_model(tmp_path)
    registry = Registry(Engine(test_device))
    registry.load(str(_layer(tmp_path, COPY)))
    engine = registry.engine
    request = Network(model, registry, engine).create_request()
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 4)).astype(np.float32)
    tail = np.arange(16, dtype=np.float32) + 100
    mine = cl.Buffer(engine.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                     hostbuf=np.concatenate([np.zeros(24, np.float32), tail]))
    request.set_tensor("y", mine)
    request.infer({"x": x})
    got = np.empty(40, np.float32)
    cl.enqueue_copy(engine.queue, got, mine)
    np.testing.assert_array_equal(got[:24], x.reshape(-1))
    np.testing.assert_array_equal(got[24:], tail)        # the user's bytes after the tensor
    assert not request._check.pending


@pytest.mark.parametrize("body,fails", [(COPY, "wrote past the end of the output"),
                                        ("if (i % 7 && i < 24) dst[i] = src[i];",
                                         r"layer 't0' .*: 4 of 24 elements were never written"),
                                        ("if (i < 24) dst[i] = src[i];", None)],
                         ids=["past-the-end", "unwritten", "sound"])
def test_a_model_with_a_python_layer_checks_its_custom_layers_too(tmp_path, test_device, body,
                                                                  fails):
    """A run with host steps reads its outputs by maps (PoCL may block in a read while a
    Python layer's user event is pending); the check's buffer is read back the same way, so
    such models are checked as any other."""
    from python_layer_texts import SOFTSIGN
    from customlayers.api import Engine, Network
    from customlayers.errors import ExecutionError
    from customlayers.runtime.layers.registry import Registry
    model = _custom_model(tmp_path, ("Shift", "Softsign"))
    registry = Registry(Engine(test_device))
    registry.load(str(_layer(tmp_path, body, count=ROUNDED_UP)))
    (tmp_path / "layers.py").write_text(SOFTSIGN)
    assert not list(registry.load_python(tmp_path / "layers.py"))
    net = Network(model, registry, registry.engine)
    assert [s.impl for s in net.plan.steps] == ["custom", "python"]
    request = net.create_request()
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 4)).astype(np.float32)
    if fails:
        for _ in range(2):
            with pytest.raises(ExecutionError, match=fails):
                request.infer({"x": x})
    else:
        for _ in range(2):
            np.testing.assert_allclose(request.infer({"x": x})["y"], x / (1 + np.abs(x)),
                                       rtol=1e-6)
        assert not request._check.pending


def test_a_models_custom_layer_that_leaves_its_output_unwritten_is_an_error(tmp_path, capsys):
    """The model declares the custom node's output larger than what its kernel covers (the
    global size counts the input): without any flag, the first inference reports the elements
    never written, and nothing is written."""
    config = _layer(tmp_path, "dst[i] = src[i];", dim="input,0")
    model = _model_with_custom_node(tmp_path, [1, 2, 3, 8])
    out = tmp_path / "out.npz"
    code = main(["run", "-m", str(model), "-c", str(config), "-d", "CPU", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 1 and not out.exists() and "Traceback" not in captured.err
    assert (f"layer 's' (Shift, defined at {config}:1:1): output 0 (1x2x3x8 f32 bfyx): 24 of "
            f"48 elements were never written by its kernel in this inference, the first at index "
            f"(0, 1, 0, 0): its work sizes or its guards do not cover the output the model gives "
            f"it" in captured.err)
    assert f"Fix the layer's <WorkSizes> ({config}:9:" in captured.err


def test_a_models_first_inference_checks_its_custom_layers_until_one_passes(tmp_path,
                                                                            test_device):
    from customlayers.api import Engine, Network
    from customlayers.errors import ExecutionError
    from customlayers.runtime.layers.registry import Registry
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 4)).astype(np.float32)
    engine = Engine(test_device)
    broken = Registry(engine)
    broken.load(str(_layer(tmp_path, "dst[i] = src[i];", dim="input,0")))
    request = Network(_model_with_custom_node(tmp_path, [1, 2, 3, 8]), broken,
                      engine).create_request()
    for _ in range(2):          # not only once: a run that failed the check is checked again
        with pytest.raises(ExecutionError, match=r"24 of 48 elements were never written"):
            request.infer({"x": x})
    sound = Registry(engine)
    sound.load(str(_layer(tmp_path, COPY)))
    net = Network(_model_with_custom_node(tmp_path, [1, 2, 3, 4]), sound, engine)
    request = net.create_request()
    for _ in range(3):          # the first run checks (fills, reads back); the later ones not
        np.testing.assert_array_equal(request.infer({"x": x})["y"], np.maximum(x, 0))
        assert not request._check.pending


MVCL_TWO_STAGES = """<CustomLayer name="{name}" type="MVCL" version="1" stage="{stage}">
  <Kernel entry="{entry}"><Source filename="k.cl"/></Kernel>
  <Parameters>
    <Tensor arg-name="src" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-name="dst" type="output" port-index="0" format="BFYX"/>
  </Parameters>
  <WorkSizes dim="input,0" global="B*F*Y*X,1,1"/>
</CustomLayer>
"""
MVCL_KERNELS = """
__kernel void copy(__global const float* src, __global float* dst)
{ int i = get_global_id(0); dst[i] = src[i]; }
__kernel void twice(__global const float* src, __global float* dst)
{ int i = get_global_id(0); dst[i] = dst[i] * 2.0f; }
__kernel void odd(__global const float* src, __global float* dst)
{ int i = get_global_id(0); if (i % 2) dst[i] = src[i]; }
"""


MVCL_BUFFER = """<CustomLayer name="ChanNorm" type="MVCL" version="1" stage="0">
  <Kernel entry="csum"><Source filename="csum.cl"/></Kernel>
  <Parameters>
    <Tensor arg-name="src" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-name="sums" type="output_buffer" port-index="0" dim="input,0" size="{size}"/>
    <Scalar arg-name="C" type="int" port-index="0" source="I.F"/>
  </Parameters>
  <WorkSizes dim="input,0" global="X*Y,B,1"/>
</CustomLayer>
<CustomLayer name="ChanNorm" type="MVCL" version="1" stage="1">
  <Kernel entry="cdiv"><Source filename="csum.cl"/></Kernel>
  <Parameters>
    <Tensor arg-name="src" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-name="dst" type="output" port-index="0" format="BFYX"/>
    <Tensor arg-name="sums" type="input_buffer" port-index="0" dim="input,0" size="{size}"/>
    <Scalar arg-name="C" type="int" port-index="0" source="I.F"/>
  </Parameters>
  <WorkSizes dim="input,0" global="X*Y,F,B"/>
</CustomLayer>
"""
MVCL_BUFFER_KERNELS = """
__kernel void csum(__global const float* src, __global float* sums, int C)
{
    const int p = get_global_id(0), P = get_global_size(0), b = get_global_id(1);
    float s = 0; for (int c = 0; c < C; ++c) s += fabs(src[(b*C + c)*P + p]);
    sums[b*P + p] = s;
}
__kernel void cdiv(__global const float* src, __global float* dst, __global const float* sums,
                   int C)
{
    const int p = get_global_id(0), P = get_global_size(0), c = get_global_id(1),
              b = get_global_id(2);
    dst[(b*C + c)*P + p] = src[(b*C + c)*P + p] / (sums[b*P + p] + 1.0f);
}
"""


@pytest.mark.parametrize("checks", [[], ["--check-bounds"]], ids=["plain", "check-bounds"])
@pytest.mark.parametrize("size", ["B*Y*X*4", "B*Y*4"], ids=["sized", "too-small"])
def test_an_mvcl_buffer_smaller_than_its_kernel_writes_is_an_error(tmp_path, capsys, size,
                                                                   checks):
    """An output_buffer whose size formula forgot X: the kernel wrote 384 bytes into 48, past
    the buffer into the heap ("double free or corruption", or a segfault, after the run). Its
    slot now has a guard zone, checked in the first run."""
    (tmp_path / "csum.cl").write_text(MVCL_BUFFER_KERNELS)
    config = tmp_path / "chan.xml"
    config.write_text(MVCL_BUFFER.format(size=size))
    x = np.random.default_rng(4).standard_normal((2, 4, 6, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    code = main(["run-layer", "-c", str(config), "-i", str(tmp_path / "x.npy"), "-d", "CPU",
                 "--output-shape", "2x4x6x8", "-o", str(out), *checks])
    err = capsys.readouterr().err
    if size == "B*Y*X*4":
        # (--check-bounds was refused for MVCL layers under run-layer; through the model path
        # it reported bytes of the float buffer that matched its pattern as never written)
        assert code == 0, err
        np.testing.assert_allclose(np.load(out), x / (np.abs(x).sum(1, keepdims=True) + 1),
                                   rtol=1e-5)
        return
    assert code == 1 and not out.exists() and "Traceback" not in err
    if checks:
        assert ("layer 'ChanNorm/stage0': output 0: the kernel wrote past the end of the "
                "buffer (48 elements, 48 u8 bfyx)" in err), err
        return
    assert (f"(ChanNorm, defined at {config}:1:1): its buffer of port-index 0 (a <Tensor "
            f"type=\"output_buffer\">, 48 bytes by its size formula): the kernel wrote past its "
            f"end: 336 of the 4096 bytes after it changed, the first right at its end; make the "
            f"size formula cover what the kernel writes" in err), err


@pytest.mark.parametrize("second,want", [("twice", "2x"), ("odd", "unwritten")])
def test_mvcl_stages_that_share_an_output_are_checked_as_one_layer(test_device, second, want):
    """Stage 1 reads what stage 0 wrote into the output: the sentinel goes in before the first
    stage and is looked for after the last, never between them."""
    from customlayers.errors import ExecutionError
    from customlayers.runtime.compile.one_layer import run_layer
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(Engine(test_device))
    registry.load_string("\n".join(
        MVCL_TWO_STAGES.format(name="Two", stage=k, entry=e)
        for k, e in ((0, "odd" if want == "unwritten" else "copy"), (1, second))),
        {"k.cl": MVCL_KERNELS}, name="two.xml")
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 4)).astype(np.float32)
    if want == "2x":
        (y,) = run_layer(registry, "Two", [x], output_shapes=[x.shape])
        np.testing.assert_array_equal(y, 2 * x)
    else:
        with pytest.raises(ExecutionError, match=r"output 0 \(1x2x3x4 f32 bfyx\): 12 of 24 "
                                                 r"elements were never written"):
            run_layer(registry, "Two", [x], output_shapes=[x.shape])


def test_a_custom_output_written_in_another_format_is_checked(tmp_path, test_device):
    """A BYXF output is the kernel's temporary, reordered into the model's layout afterwards:
    the temporary is what the check fills and reads."""
    from customlayers.api import Engine, Network
    from customlayers.errors import ExecutionError
    from customlayers.runtime.layers.registry import Registry
    config = _layer(tmp_path, "if (i % 5 != 3) dst[i] = src[i];", fmt="BYXF")
    registry = Registry(Engine(test_device))
    registry.load(str(config))
    net = Network(_model_with_custom_node(tmp_path, [1, 2, 3, 4]), registry, registry.engine)
    with pytest.raises(ExecutionError, match=r"output 0 \(1x2x3x4 f32 byxf\): 5 of 24 elements "
                                             r"were never written by its kernel"):
        net.create_request().infer({"x": np.ones((1, 2, 3, 4), np.float32)})


def test_an_integer_output_that_holds_the_sentinels_value_is_not_an_error(tmp_path,
                                                                          test_device):
    """One run cannot tell an integer sentinel from a value the kernel computed (an identity
    over data holding 0xA5A5A5A5 is correct): a model's first inference checks float outputs
    only; the numpy call, which can run twice, checks both."""
    from customlayers.api import Engine, Network
    from customlayers.runtime.layers.registry import Registry
    (tmp_path / "shift.cl").write_text(
        "__kernel void shift(__global const int* src, __global int* dst)\n"
        "{ const int i = get_global_id(0); dst[i] = src[i]; }\n")
    (tmp_path / "shift.xml").write_text(LAYER.format(count="B*F*Y*X", fmt="BFYX",
                                                     dim="output"))
    registry = Registry(Engine(test_device))
    registry.load(str(tmp_path / "shift.xml"))
    path = _custom_model(tmp_path, elem="INT32")
    x = np.arange(24, dtype=np.int32).reshape(1, 2, 3, 4)
    x[0, 1, 2, 3] = np.uint32(0xA5A5A5A5).view(np.int32)
    y = Network(path, registry, registry.engine).create_request().infer({"x": x})["y"]
    np.testing.assert_array_equal(y, x)


def test_an_integer_output_written_past_its_end_is_an_error(tmp_path, test_device):
    """An integer output's elements are not checked in a model (above), but the guard zone after
    it is: a kernel whose rounded-up work sizes write past the end is found in any type."""
    from customlayers.api import Engine, Network
    from customlayers.errors import ExecutionError
    from customlayers.runtime.layers.registry import Registry
    path = _custom_model(tmp_path, elem="INT32")
    x = np.arange(24, dtype=np.int32).reshape(1, 2, 3, 4)
    for body, fails in [("dst[i] = src[i % 24];", True), ("if (i < 24) dst[i] = src[i];", False)]:
        (tmp_path / "shift.cl").write_text(
            "__kernel void shift(__global const int* src, __global int* dst)\n"
            f"{{ const int i = get_global_id(0); {body} }}\n")
        (tmp_path / "shift.xml").write_text(LAYER.format(count=ROUNDED_UP, fmt="BFYX",
                                                         dim="output"))
        registry = Registry(Engine(test_device))
        registry.load(str(tmp_path / "shift.xml"))
        request = Network(path, registry, registry.engine).create_request()
        if fails:
            with pytest.raises(ExecutionError, match=r"output 0 \(1x2x3x4 i32 bfyx\): the kernel "
                                                     r"wrote past the end of the output: 160 of "
                                                     r"the 4096 bytes after it changed"):
                request.infer({"x": x})
        else:
            np.testing.assert_array_equal(request.infer({"x": x})["y"], x)
            assert not request._check.pending


def test_the_first_run_keeps_the_users_wait_for_when_it_fills_nothing(tmp_path, test_device):
    """An integer custom output in the user's own buffer has nothing to fill (its elements are
    not checked, and a user's buffer has no guard zone): the wait list the fill would have
    taken must stay the kernel's. It did not, and the kernel ran before the user's upload
    (found by a review: y was 1 everywhere, src + 1 of the zeros not yet replaced)."""
    import pyopencl as cl
    from customlayers.api import Engine, Network
    from customlayers.runtime.layers.registry import Registry
    (tmp_path / "shift.cl").write_text(
        "__kernel void shift(__global const int* src, __global int* dst)\n"
        "{ const int i = get_global_id(0); dst[i] = src[i] + 1; }\n")
    (tmp_path / "shift.xml").write_text(LAYER.format(count="B*F*Y*X", fmt="BFYX",
                                                     dim="output"))
    path = _custom_model(tmp_path, elem="INT32")
    registry = Registry(Engine(test_device))
    registry.load(str(tmp_path / "shift.xml"))
    engine = registry.engine
    request = Network(path, registry, engine).create_request()
    mf = cl.mem_flags
    x = cl.Buffer(engine.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(24, np.int32))
    y = cl.Buffer(engine.context, mf.READ_WRITE, 24 * 4)
    request.set_tensor("x", x)
    request.set_tensor("y", y)
    side = cl.CommandQueue(engine.context)
    gate = cl.UserEvent(engine.context)
    upload = cl.enqueue_copy(side, x, np.arange(100, 124, dtype=np.int32), wait_for=[gate],
                             is_blocking=False)
    request.start_async(wait_for=[upload])
    gate.set_status(cl.command_execution_status.COMPLETE)
    request.wait()
    got = np.empty(24, np.int32)
    cl.enqueue_copy(side, got, y)
    np.testing.assert_array_equal(got, np.arange(101, 125))


def test_a_guard_zone_never_pushes_a_slot_past_the_devices_largest_buffer(tmp_path,
                                                                         test_device):
    """The plan's guards were not clamped (the numpy call's were): a tensor just under the
    device's largest allocation made a slot over it, and creating the request failed with
    INVALID_BUFFER_SIZE (found by a review with an 8 GiB tensor on PoCL)."""
    from customlayers.api import Engine, Network
    from customlayers.runtime.compile.plan_buffers import plan_memory_of
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(Engine(test_device))
    registry.load(str(_layer(tmp_path, COPY)))
    plan = Network(_model_with_custom_node(tmp_path, [1, 2, 3, 4]), registry,
                   registry.engine).plan
    assert list(plan.memory.guards.values()) == [4096]
    for largest in (96 + 4096 + 255, 2048, 600):
        memory = plan_memory_of(plan.steps, plan.descs, plan.alias, plan.consts, plan.inputs,
                                plan.outputs, plan.states, largest=largest)
        assert max(memory.slot_sizes) <= largest
        assert all(0 < g <= largest - 96 for g in memory.guards.values())


@needs_oclgrind
def test_run_sanitize_reports_the_models_custom_layer_at_its_line(tmp_path, capsys):
    config = _layer(tmp_path, "dst[i] = src[i + 1];")
    model = _model_with_custom_node(tmp_path, [1, 2, 3, 4])
    code = main(["run", "-m", str(model), "-c", str(config), "-d", "CPU", "--sanitize"])
    captured = capsys.readouterr()
    assert code == 1
    assert f"{tmp_path / 'shift.cl'}:4:" in captured.err and "layer 's': invalid read of " \
                                                            "size 4 by 1 work-item" in captured.err


@needs_oclgrind
def test_a_sound_model_passes_both_checks(tmp_path, capsys):
    config = _layer(tmp_path, COPY)
    model = _model_with_custom_node(tmp_path, [1, 2, 3, 4])
    assert main(["run", "-m", str(model), "-c", str(config), "-d", "CPU", "--check-bounds",
                 "--sanitize"]) == 0
    assert "y: shape [1, 2, 3, 4]" in capsys.readouterr().out
