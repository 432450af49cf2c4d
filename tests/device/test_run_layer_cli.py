"""The `layers`, `run-layer` and `demo` commands, through customlayers.cli.main as a user runs
them: real kernels, outputs compared with numpy, errors as messages with exit codes."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.cli import main

TWO_OUT_CL = """
__kernel void split_sign(const __global float* x, __global float* pos, __global float* neg)
{
    const uint i = get_global_id(0);
    pos[i] = fmax(x[i], 0.0f);
    neg[i] = fmin(x[i], 0.0f);
}
"""
TWO_OUT_XML = """<CustomLayer name="SplitSign" type="SimpleGPU" version="1">
  <Kernel entry="split_sign"><Source filename="split.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
    <Tensor arg-index="2" type="output" port-index="1"/>
  </Buffers>
</CustomLayer>
"""


@pytest.fixture
def ex(examples_dir):
    return lambda name: str(examples_dir / name / f"{name}.xml")


def save(path, array):
    np.save(path, array)
    return str(path)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_layers_lists_bindings_and_places(ex, capsys):
    assert main(["layers", "-c", ex("scale_shift"), "-c", ex("reorg")]) == 0
    out = capsys.readouterr().out
    assert "ScaleShift  (" in out and "scale_shift.xml:3)" in out
    assert "1: data 'weights' (INPUT1, 1-D)" in out
    assert "3: output 0 (ANY)" in out
    assert "STRIDE = attribute 'stride' (default 2) [int]" in out
    assert "global=(X+7)/8*8,Y,B*F  local=8,1,1  dim=input,0" in out


def test_run_layer_relu_with_param(ex, tmp_path, capsys):
    x = rand(1, 3, 5, 7)
    out = tmp_path / "out.npy"
    status = main(["run-layer", "-c", ex("relu"), "--layer", "ReLU",
                   "-i", save(tmp_path / "x.npy", x.astype(np.float64)),
                   "--param", "negative_slope=0.25", "-o", str(out)])
    assert status == 0, capsys.readouterr().err
    np.testing.assert_allclose(np.load(out), np.where(x < 0, 0.25 * x, x), rtol=1e-6)
    assert "wrote 1x3x5x7" in capsys.readouterr().out


def test_run_layer_output_shape_and_data(ex, examples_dir, tmp_path):
    from customlayers.cli.model_commands.demo import load_example
    x = rand(1, 8, 4, 6)
    out = tmp_path / "reorg.npy"
    assert main(["run-layer", "-c", ex("reorg"), "--layer", "ReorgYolo",
                 "-i", save(tmp_path / "x.npy", x), "--output-shape", "1x32x2x3",
                 "-o", str(out)]) == 0
    ref = load_example(examples_dir / "reorg").reference.reference([x], {}, {})[0]
    np.testing.assert_array_equal(np.load(out), ref)

    w, b = rand(8, seed=1), rand(8, seed=2)
    out = tmp_path / "ss.npy"
    assert main(["run-layer", "-c", ex("scale_shift"), "--layer", "ScaleShift",
                 "-i", save(tmp_path / "x.npy", x), "--data", f"weights={save(tmp_path / 'w.npy', w)}",
                 "--data", f"biases={save(tmp_path / 'b.npy', b)}", "-o", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), x * w.reshape(1, 8, 1, 1) + b.reshape(1, 8, 1, 1),
                               rtol=1e-5, atol=1e-6)


def test_run_layer_two_inputs(ex, tmp_path):
    a, b = rand(2, 2, 3, 4, seed=1), rand(2, 2, 3, 4, seed=2)
    out = tmp_path / "sum.npy"
    assert main(["run-layer", "-c", ex("scaled_add"), "--layer", "ScaledAdd",
                 "-i", save(tmp_path / "a.npy", a), "-i", save(tmp_path / "b.npy", b),
                 "--param", "weights=2,-1", "-o", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), 2 * a - b, rtol=1e-5, atol=1e-6)


def test_run_layer_several_outputs_write_npz(tmp_path, capsys):
    (tmp_path / "split.xml").write_text(TWO_OUT_XML)
    (tmp_path / "split.cl").write_text(TWO_OUT_CL)
    x = rand(1, 2, 3, 4)
    args = ["run-layer", "-c", str(tmp_path / "split.xml"), "--layer", "SplitSign",
            "-i", save(tmp_path / "x.npy", x)]
    assert main(args + ["-o", str(tmp_path / "out.npy")]) == 2
    assert "layer 'SplitSign' has 2 outputs: a .npy holds one; name the file .npz" in \
        capsys.readouterr().err
    assert main(args + ["-o", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_array_equal(z["output0"], np.maximum(x, 0))
        np.testing.assert_array_equal(z["output1"], np.minimum(x, 0))


# each case: the arguments after "-c relu.xml" (x = an input .npy, cfg = the config), the exit
# status and a piece of the message
@pytest.mark.parametrize("make_args,status,message", [
    (lambda x, cfg: ["--layer", "Nope", "-i", x], 1,
     "error: no custom layer of type 'Nope'; known: ReLU"),
    (lambda x, cfg: ["--layer", "ReLU", "-i", x, "--param", "oops"], 2,
     "--param 'oops' is not KEY=VALUE"),
    (lambda x, cfg: ["--layer", "ReLU", "-i", x, "--output-shape", "1xQ"], 2,
     "--output-shape '1xQ' is not like"),
    (lambda x, cfg: ["--layer", "ReLU", "-i", "MISSING.npy"], 2,
     "MISSING.npy: No such file or directory"),
    (lambda x, cfg: ["--layer", "ReLU", "-i", x, "-i", x], 1,
     "has 1 input port(s), 2 tensor(s) were given"),
    (lambda x, cfg: ["--layer", "ReLU", "-i", cfg], 2, "relu.xml: not a .npy array file"),
], ids=["unknown-layer", "bad-param", "bad-shape", "missing-file", "too-many-inputs",
        "not-npy"])
def test_run_layer_errors_are_messages(ex, tmp_path, capsys, make_args, status, message):
    x = save(tmp_path / "x.npy", rand(1, 1, 2, 2))
    out = tmp_path / "out.npy"
    args = make_args(x, ex("relu"))
    assert main(["run-layer", "-c", ex("relu"), *args, "-o", str(out)]) == status
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()
    assert not list(tmp_path.glob(".out.npy*"))     # no temporary left behind


def test_run_layer_missing_data_is_a_usage_error(ex, tmp_path, capsys):
    x = save(tmp_path / "x.npy", rand(1, 3, 2, 2))
    assert main(["run-layer", "-c", ex("scale_shift"), "--layer", "ScaleShift", "-i", x,
                 "-o", str(tmp_path / "o.npy")]) == 2
    assert "give --data weights=FILE.npy --data biases=FILE.npy" in capsys.readouterr().err


def test_demo_table(cl_env):
    from customlayers.cli.model_commands.demo import examples_table
    from customlayers.runtime.device.device import Engine
    table = examples_table(Engine(cl_env[2]), runs=3)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["layer", "shapes", "device", "max"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) >= {"ReLU", "GRN", "ReorgYolo", "ScaledAdd", "SpatialMask", "HardSwishCL",
                         "ScaleShift"}
    assert "1x4x6x10 -> 1x16x3x5" in rows["ReorgYolo"]
    for line in lines[2:]:
        error = float(line.split()[-4])
        assert error < 1e-5, line


def test_demo_command(capsys):
    assert main(["demo", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "validated 7 example configs" in out or "example configs" in out
    assert "ReorgYolo" in out and "time/run (median of 2)" in out
    assert main(["demo", "--runs", "0"]) == 2


def test_demo_says_why_its_first_run_is_slow_and_a_warm_one_says_nothing(tmp_path, capsys):
    """A first demo on a new machine compiled for 20-25 s (2-core PoCL) without a word between
    the layer table and the model; it now says, on stderr, as the first compile starts, that it
    is compiling what the cache (named) lacks. A run that compiles nothing says nothing."""
    cache_dir = tmp_path / "cache"
    assert main(["demo", "--runs", "1", "-cdir", str(cache_dir)]) == 0
    err = capsys.readouterr().err
    assert err.count("demo: compiling") == 1, err          # once, not once per program
    assert str(cache_dir) in err and "later runs" in err
    assert main(["demo", "--runs", "1", "-cdir", str(cache_dir)]) == 0
    assert "demo: compiling" not in capsys.readouterr().err


def test_a_misspelled_data_name_is_named(tmp_path, ex, capsys):
    """--data scal=... said only that 'weights' was missing (a new-user trial)."""
    x = save(tmp_path / "x.npy", rand(1, 2, 3, 4))
    assert main(["run-layer", "-c", ex("scale_shift"), "-d", "CPU", "-i", x,
                 "--data", f"weights={x}", "--data", f"biasses={x}",
                 "-o", str(tmp_path / "y.npy")]) == 2
    assert ("--data biasses: layer 'ScaleShift' has no Data named so; its Data: weights, "
            "biases" in capsys.readouterr().err)


def test_an_mvcl_output_left_unwritten_says_where_its_shape_came_from(tmp_path, ex, capsys):
    """The ReorgYoloNHWC run of docs/mvcl.md on an input that does not make 1x16x3x5: the error
    named the layer's work sizes only; the shape was run-layer's --output-shape. (The trial's
    input, 1x1x8x8, has fewer channels than stride 2 needs: the example kernel then divides by
    zero, which PoCL's SIGFPE handler absorbs unless pytest's faulthandler took the signal
    first.)"""
    x = save(tmp_path / "x.npy", rand(1, 4, 4, 8))
    out = tmp_path / "y.npy"
    assert main(["run-layer", "-c", ex("reorg_nhwc"), "-d", "CPU",
                 "-i", x, "--param", "stride=2", "--output-shape", "1x16x3x5",
                 "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert not out.exists() and "112 of 240 elements were never written" in err
    assert ("note: the output shape (1x16x3x5) came from --output-shape, for input 1x4x4x8 f32 "
            "bfyx: if the layer writes another shape for these inputs, give that one") in err
    x = save(tmp_path / "x.npy", rand(1, 4, 6, 10))        # the input docs/mvcl.md now names
    assert main(["run-layer", "-c", ex("reorg_nhwc"), "-d", "CPU",
                 "-i", x, "--param", "stride=2", "--output-shape", "1x16x3x5",
                 "-o", str(out)]) == 0
    assert np.load(out).shape == (1, 16, 3, 5)


def test_a_layer_defined_again_is_said(tmp_path, capsys, ex, examples_dir):
    """Two configs of one layer type: the later replaces the earlier, and run-layer says so
    (CL070, as `run` does); it said nothing."""
    import shutil
    second = tmp_path / "relu.xml"
    shutil.copy(examples_dir / "relu" / "relu.xml", second)
    shutil.copy(examples_dir / "relu" / "relu.cl", tmp_path / "relu.cl")
    code = main(["run-layer", "-c", ex("relu"), "-c", str(second), "--layer", "ReLU", "-i",
                 save(tmp_path / "x.npy", rand(1, 2, 3, 4)), "-o", str(tmp_path / "y.npy")])
    err = capsys.readouterr().err
    assert code == 0
    assert f"{second}:3:1: warning[CL070]: layer 'ReLU' is defined again; this definition " \
           f"replaces the one at " in err and err.count("CL070") == 1, err
