"""`run-layer` runs a layer in the element type the layer takes, whatever the .npy holds (issue
18: an int32 array compiled a float layer for int, and Mish returned integers; a bool array ran
it as uchar). An array of another type is converted, with a notice on stderr, as `run` converts
a model's inputs: one rule, one message."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.cli import main

# a kernel written for the generic INPUT0_TYPE/OUTPUT0_TYPE, computing in float
MISH_CL = """
__kernel void mish(const __global INPUT0_TYPE* x, __global OUTPUT0_TYPE* y)
{
    const uint i = get_global_id(0);
    const float v = (float)x[i];
    y[i] = (OUTPUT0_TYPE)(v * tanh(log(1.0f + exp(v))));
}
"""
MISH_XML = """<CustomLayer name="Mish" type="SimpleGPU" version="1">
  <Kernel entry="mish"><Source filename="mish.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""
# a layer whose kernel declares its element type: int in, int out
TRIPLE_CL = """
__kernel void mish(const __global int* x, __global int* y)
{
    const uint i = get_global_id(0);
    y[i] = 3 * x[i];
}
"""

def mish(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return (v * np.tanh(np.log1p(np.exp(v)))).astype(np.float32)


def layer(tmp_path, cl: str = MISH_CL):
    (tmp_path / "mish.cl").write_text(cl)
    (tmp_path / "mish.xml").write_text(MISH_XML)
    return str(tmp_path / "mish.xml")


def run_layer(tmp_path, config, array, capsys):
    np.save(tmp_path / "x.npy", array)
    out = tmp_path / "y.npy"
    status = main(["run-layer", "-c", config, "-i", str(tmp_path / "x.npy"), "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 0, err
    return np.load(out), err


@pytest.mark.parametrize("array", [
    np.arange(-3, 5, dtype=np.int32).reshape(1, 2, 2, 2),
    np.arange(-3, 5, dtype=np.int64).reshape(1, 2, 2, 2),
    np.arange(0, 8, dtype=np.uint8).reshape(1, 2, 2, 2),
    (np.arange(8) % 3 == 0).reshape(1, 2, 2, 2),
], ids=["int32", "int64", "uint8", "bool"])
def test_an_integer_or_bool_array_runs_a_generic_layer_in_float(tmp_path, capsys, array):
    got, err = run_layer(tmp_path, layer(tmp_path), array, capsys)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, mish(array), rtol=1e-5, atol=1e-6)
    assert (f"input 0 ({tmp_path / 'x.npy'}) is {array.dtype}; layer 'Mish' takes float32: "
            f"converted") in err


def test_float_arrays_keep_their_type_quietly(tmp_path, capsys):
    """float32 runs as is; float64 as float32 (documented, no note)."""
    x = np.linspace(-2, 2, 8).reshape(1, 2, 2, 2)
    config = layer(tmp_path)
    for given in (np.float32, np.float64):
        got, err = run_layer(tmp_path, config, x.astype(given), capsys)
        assert got.dtype == np.float32 and "converted" not in err
        np.testing.assert_allclose(got, mish(x), rtol=1e-5, atol=1e-6)


def test_a_kernel_that_declares_its_type_gets_that_type(tmp_path, capsys):
    """`__global const int* x`: the layer takes int32; a float32 array is converted to it (as
    numpy casts: toward zero), and a bool one too."""
    x = np.array([1.7, -2.2, 0.4, 5.0, -0.9, 3.0, 7.5, -8.0], np.float32).reshape(1, 2, 2, 2)
    config = layer(tmp_path, TRIPLE_CL)
    got, err = run_layer(tmp_path, config, x, capsys)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, 3 * x.astype(np.int32))
    assert "is float32; layer 'Mish' takes int32: converted" in err
    got, err = run_layer(tmp_path, config, x > 0, capsys)
    np.testing.assert_array_equal(got, 3 * (x > 0).astype(np.int32))
    assert "is bool; layer 'Mish' takes int32: converted" in err


def test_an_mvcl_layer_takes_its_kernels_type(tmp_path, capsys, examples_dir):
    """The MVCL reorg example's kernel reads `__global const float *src`: an int32 array is
    converted to float32 (it was refused: the layer was built for int)."""
    import importlib.util
    folder = examples_dir / "reorg_nhwc"
    spec = importlib.util.spec_from_file_location("reorg_nhwc_reference", folder / "reference.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    x = np.arange(4 * 6 * 10, dtype=np.int32).reshape(1, 4, 6, 10)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    shape = "x".join(map(str, ref.output_shape(x.shape, 2)))
    assert main(["run-layer", "-c", str(folder / "reorg_nhwc.xml"), "-i", str(tmp_path / "x.npy"),
                 "--param", "stride=2", "--output-shape", shape, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "is int32; layer 'ReorgYoloNHWC' takes float32: converted" in err
    got = np.load(out)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref.reference([x.astype(np.float32)], {"stride": "2"},
                                                     {})[0])


def test_run_says_the_same_of_a_models_input(tmp_path, capsys, examples_dir):
    """`run` converts an int32 array to the model's float32 input, with the same note."""
    model = examples_dir.parent / "models" / "demo_cnn_builtin.xml"
    x = (np.arange(3 * 32 * 32) % 7 - 3).astype(np.int32).reshape(1, 3, 32, 32)
    outs = []
    for given in (x, x.astype(np.float32)):
        np.save(tmp_path / "x.npy", given)
        assert main(["run", "-m", str(model), "-i", str(tmp_path / "x.npy"),
                     "-o", str(tmp_path / "y.npy")]) == 0
        outs.append((np.load(tmp_path / "y.npy"), capsys.readouterr().err))
    assert f"input 'data' ({tmp_path / 'x.npy'}) is int32; the model takes float32: " \
           f"converted" in outs[0][1]
    assert "converted" not in outs[1][1]
    np.testing.assert_array_equal(outs[0][0], outs[1][0])


PY_MISH = '''import numpy as np
from customlayers.api import cpu_layer


@cpu_layer("PyMish")
class PyMish:
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        x = inputs[0]
        np.copyto(outputs[0], x * np.tanh(np.log1p(np.exp(x))), casting="unsafe")
'''


def test_a_python_layer_alone_runs_in_float_too(tmp_path, capsys):
    """A Python layer declares no input types: an int32 array runs it in float32, as a generic
    kernel does (its outputs took the int type and truncated)."""
    (tmp_path / "mish.py").write_text(PY_MISH)
    x = np.arange(-3, 5, dtype=np.int32).reshape(1, 2, 2, 2)
    np.save(tmp_path / "x.npy", x)
    assert main(["run-layer", "-l", str(tmp_path / "mish.py"), "--layer", "PyMish",
                 "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    assert "is int32; layer 'PyMish' takes float32: converted" in capsys.readouterr().err
    got = np.load(tmp_path / "y.npy")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, mish(x), rtol=1e-5, atol=1e-6)
