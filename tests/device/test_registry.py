"""Registry and BoundKernel: loading, lookup, the binding rules of SPEC sections 2 and 5, and the
three ways to run a bound kernel (launch, enqueue, __call__), on real kernels."""
from __future__ import annotations

import warnings

import numpy as np
import pyopencl as cl
import pytest

from customlayers.errors import (BindingError, ConfigError, FormulaError, LayerRedefinedWarning,
                                 UnknownLayerError)
from customlayers.jit.tensor import TensorDesc
from launch_runner import run_launches

COPY_CL = """
__kernel void copy_kernel(const __global INPUT0_TYPE* src, __global OUTPUT0_TYPE* dst)
{
    const uint x = get_global_id(0), y = get_global_id(1), bf = get_global_id(2);
    const uint f = bf % OUTPUT0_DIMS[1], b = bf / OUTPUT0_DIMS[1];
    dst[OUTPUT0_OFFSET + b*OUTPUT0_PITCHES[0] + f*OUTPUT0_PITCHES[1] + y*OUTPUT0_PITCHES[2]
        + x*OUTPUT0_PITCHES[3]] =
        src[INPUT0_OFFSET + b*INPUT0_PITCHES[0] + f*INPUT0_PITCHES[1] + y*INPUT0_PITCHES[2]
            + x*INPUT0_PITCHES[3]] * SCALE;
}
"""


def copy_layer(name="Copy", in_fmt="ANY", out_fmt="ANY", work="global=\"X,Y,B*F\"",
               extra_define=""):
    return f"""<CustomLayer name="{name}" type="SimpleGPU" version="1">
  <Kernel entry="copy_kernel">
    <Source filename="copy.cl"/>
    <Define name="SCALE" type="float" param="scale" default="1.0"/>{extra_define}
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="{in_fmt}"/>
    <Tensor arg-index="1" type="output" port-index="0" format="{out_fmt}"/>
  </Buffers>
  <WorkSizes {work}/>
</CustomLayer>"""


@pytest.fixture(scope="module")
def engine(cl_env):
    from customlayers.runtime.device.device import Engine
    return Engine(cl_env[2])


@pytest.fixture
def registry(engine):
    from customlayers.runtime.layers.registry import Registry
    return Registry(engine)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- loading and lookup ---------------------------------------------------------------------
def test_load_string_lookup_and_miss(registry):
    diags = registry.load_string(copy_layer(), {"copy.cl": COPY_CL}, name="mem.xml")
    assert not diags.errors
    assert registry.layer_types() == ["Copy"]
    assert "Copy" in registry and "Nope" not in registry
    assert registry.spec("Copy").entry == "copy_kernel"
    with pytest.raises(UnknownLayerError) as e:
        registry.spec("Nope")
    assert str(e.value) == "no custom layer of type 'Nope'; known: Copy"


def test_the_engine_is_chosen_when_the_registry_is_made(engine, cl_env):
    """The registry binds on the engine it was made with; setting another later is refused
    (a network would otherwise get programs of another context), and a Network on another
    engine refuses the registry."""
    from customlayers.errors import DeviceError
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.compile.one_layer import one_layer_graph
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(engine)
    assert registry.engine is engine
    with pytest.raises(AttributeError, match="chosen when it is made"):
        registry.engine = Engine(cl_env[2])
    assert registry.engine is engine
    registry.load_string(copy_layer(), {"copy.cl": COPY_CL}, name="mem.xml")
    with pytest.raises(DeviceError, match="make the Registry with the network's engine"):
        Network(one_layer_graph("Copy", [rand(1, 2, 3, 4)], {}, [None], {}), registry,
                Engine(cl_env[2]))


def test_load_files_and_redefinition_warns(registry, examples_dir, tmp_path):
    registry.load(examples_dir / "relu" / "relu.xml")
    other = tmp_path / "relu2.xml"
    other.write_text(copy_layer(name="ReLU"))
    (tmp_path / "copy.cl").write_text(COPY_CL)
    # an API user who never reads the diagnostics is warned too (a new user's trial)
    with pytest.warns(LayerRedefinedWarning, match=r"CL070.*'ReLU' is defined again"):
        diags = registry.load(other)
    assert [d.code for d in diags.warnings] == ["CL070"]
    assert "relu.xml" in diags.warnings[0].message
    assert registry.spec("ReLU").entry == "copy_kernel"     # the later one wins
    # with the warning made an error, the load replaces nothing
    third = tmp_path / "relu3.xml"
    third.write_text(copy_layer(name="ReLU"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LayerRedefinedWarning)
        with pytest.raises(LayerRedefinedWarning):
            registry.load(third)
    assert registry.spec("ReLU").location.file == str(other)


def test_a_failed_load_registers_nothing(registry):
    registry.load_string(copy_layer(), {"copy.cl": COPY_CL})
    bad = copy_layer(name="Good") + copy_layer(name="Bad", in_fmt="Bfyx")
    with pytest.raises(ConfigError) as e:
        registry.load_string(bad, {"copy.cl": COPY_CL}, name="bad.xml")
    assert "bad.xml" in str(e.value) and "Bfyx" in str(e.value)
    assert registry.layer_types() == ["Copy"]


# -- binding rules --------------------------------------------------------------------------
def test_formats_padding_and_default_outputs(registry):
    registry.load_string(copy_layer(name="Fixed", in_fmt="BYXF", out_fmt="FYXB")
                         + copy_layer(name="Free"), {"copy.cl": COPY_CL})
    given = TensorDesc((2, 3, 4, 5), "f32", "BFYX", (0, 1, 1, 0), (0, 0, 2, 1))
    fixed = registry.bind("Fixed", [given])
    # a declared format re-expresses the tensor (the caller reorders), padding is kept
    assert fixed.inputs[0] == given.with_format("BYXF")
    assert fixed.outputs[0] == TensorDesc((2, 3, 4, 5), "f32", "FYXB")
    free = registry.bind("Free", [given.with_format("YXFB")])
    assert free.inputs[0] == given.with_format("YXFB")
    assert free.outputs[0] == TensorDesc((2, 3, 4, 5), "f32", "YXFB")  # ANY: input 0's, unpadded
    x = rand(2, 3, 4, 5)
    np.testing.assert_array_equal(fixed(x), x)
    np.testing.assert_array_equal(free(x), x)
    assert "#define INPUT0_FORMAT_BYXF" in fixed.source.text


def test_params_reach_the_kernel(registry):
    registry.load_string(copy_layer(), {"copy.cl": COPY_CL})
    x = rand(1, 2, 3, 4)
    bound = registry.bind("Copy", [TensorDesc(x.shape)], params={"scale": "2.5"})
    np.testing.assert_allclose(bound(x), x * 2.5, rtol=1e-6)


def test_wrong_number_of_inputs_or_outputs(registry):
    registry.load_string(copy_layer(), {"copy.cl": COPY_CL}, name="c.xml")
    d = TensorDesc((1, 1, 2, 2))
    with pytest.raises(BindingError, match=r"layer type 'Copy' \(c.xml:1:1\) has 1 input "
                                           r"port\(s\), 2 tensor\(s\) were given"):
        registry.bind("Copy", [d, d])
    with pytest.raises(BindingError, match="has 1 output port"):
        registry.bind("Copy", [d], [d, d])


def test_kernel_argument_count_is_checked(registry):
    three_args = COPY_CL.replace("__global OUTPUT0_TYPE* dst)",
                                 "__global OUTPUT0_TYPE* dst, __global float* extra)")
    registry.load_string(copy_layer(), {"copy.cl": three_args}, name="c.xml")
    with pytest.raises(BindingError) as e:
        registry.bind("Copy", [TensorDesc((1, 1, 2, 2))])
    # at the first <Tensor>, in <Buffers> (it was said at the <CustomLayer>)
    assert str(e.value) == ("layer type 'Copy' (c.xml:7:5): kernel 'copy_kernel' takes 3 "
                            "arguments but the descriptor binds 2 (Tensor and Data arg-index 0, 1)")


def test_local_size_over_the_device_limit(registry, engine):
    too_many = engine.device.max_work_group_size * 2
    registry.load_string(copy_layer(work=f'global="{too_many}" local="{too_many}"'),
                         {"copy.cl": COPY_CL})
    with pytest.raises(BindingError) as e:
        registry.bind("Copy", [TensorDesc((1, 1, 2, 2))])
    msg = str(e.value)
    assert "layer type 'Copy'" in msg and f'local="{too_many}"' in msg
    assert f"allows at most {engine.device.max_work_group_size}" in msg


def test_local_size_not_dividing_global(registry, engine):
    from customlayers.runtime.device.limits import supports_non_uniform_groups
    if supports_non_uniform_groups(engine.device):
        pytest.skip("this device runs non-uniform work-groups")
    registry.load_string(copy_layer(work='global="X,Y,B*F" local="4,1,1"'), {"copy.cl": COPY_CL})
    with pytest.raises(BindingError) as e:
        registry.bind("Copy", [TensorDesc((1, 2, 3, 6))])
    msg = str(e.value)
    assert 'local="4,1,1" gives [4, 1, 1] for global [6, 3, 2]' in msg
    assert "local[0]=4 does not divide global[0]=6" in msg and "(X+3)/4*4" in msg


def test_formula_errors_name_the_layer(registry):
    registry.load_string(copy_layer(work='global="X/(Y-3),1,1"'), {"copy.cl": COPY_CL})
    with pytest.raises(FormulaError) as e:
        registry.bind("Copy", [TensorDesc((1, 1, 3, 4))])
    assert e.value.layer == "Copy" and "Copy" in str(e.value)


# -- Data blobs, launch(), enqueue() ---------------------------------------------------------
@pytest.fixture
def scale_shift(registry, examples_dir):
    registry.load(examples_dir / "scale_shift" / "scale_shift.xml")
    w, b = rand(3, seed=1), rand(3, seed=2)
    return registry.bind("ScaleShift", [TensorDesc((2, 3, 4, 5))],
                         data={"weights": w, "biases": b}), w, b


def test_data_blobs_are_extra_inputs(scale_shift, registry):
    bound, w, b = scale_shift
    text = bound.source.text
    assert "#define NUM_INPUTS 3" in text
    assert "#define INPUT1_DIMS (int []){ 3,1,1,1, }" in text
    assert bound.data_descs == (TensorDesc((3,)), TensorDesc((3,)))
    x = rand(2, 3, 4, 5)
    expect = x * w.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(bound(x), expect, rtol=1e-5, atol=1e-6)
    # a keyword replaces a bound blob for one call
    np.testing.assert_allclose(bound(x, biases=np.zeros(3)), x * w.reshape(1, 3, 1, 1),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(BindingError, match="Data 'biases' has 4 elements, the binding expects 3"):
        bound(x, biases=np.zeros(4))
    with pytest.raises(BindingError, match="binds Data biases"):
        registry.bind("ScaleShift", [TensorDesc((2, 3, 4, 5))], data={"weights": w})


def test_launch_is_the_same_work(scale_shift, cl_env):
    bound, w, b = scale_shift
    launch = bound.launch()
    assert [a.kind for a in launch.args] == ["input", "const", "const", "output"]
    np.testing.assert_array_equal(launch.args[1].value, w)
    assert launch.global_size == (5, 4, 6) and launch.entry == "scale_shift_kernel"
    x = rand(2, 3, 4, 5)
    (out,) = run_launches(cl_env, [launch], [x], bound.inputs, bound.outputs)
    np.testing.assert_allclose(out, bound(x), rtol=1e-6)


def test_enqueue_on_preallocated_buffers(registry, engine):
    registry.load_string(copy_layer(), {"copy.cl": COPY_CL})
    bound = registry.bind("Copy", [TensorDesc((1, 2, 3, 4))], params={"scale": "3"})
    ctx, queue = engine.context, engine.queue
    mf = cl.mem_flags
    xs = [rand(1, 2, 3, 4, seed=s) for s in (1, 2)]
    ins = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in xs]
    outs = [cl.Buffer(ctx, mf.READ_WRITE, xs[0].nbytes) for _ in xs]
    got = np.empty_like(xs[0])
    # same buffers twice, then others: the arguments must follow the buffers given
    for i in (0, 0, 1, 0):
        event = bound.enqueue(queue, [ins[i]], [outs[i]])
        cl.enqueue_copy(queue, got, outs[i], wait_for=[event])
        np.testing.assert_allclose(got, xs[i] * 3, rtol=1e-6)
    with pytest.raises(BindingError, match="enqueue got 2 input, 1 output and 0 data buffers; the binding has 1, 1 and 0"):
        bound.enqueue(queue, [ins[0], ins[1]], [outs[0]])


def test_enqueue_uses_bound_data(scale_shift, engine):
    bound, w, b = scale_shift
    x = rand(2, 3, 4, 5)
    mf = cl.mem_flags
    src = cl.Buffer(engine.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    dst = cl.Buffer(engine.context, mf.READ_WRITE, x.nbytes)
    bound.enqueue(engine.queue, [src], [dst])
    got = np.empty_like(x)
    cl.enqueue_copy(engine.queue, got, dst)
    np.testing.assert_allclose(got, x * w.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1),
                               rtol=1e-5, atol=1e-6)


def test_public_api_exports():
    import customlayers.api as api
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert api.Registry is __import__("customlayers.runtime.layers.registry",
                                      fromlist=["Registry"]).Registry


def test_uniform_work_group_hint_uses_that_entrys_formula(registry, engine):
    from customlayers.runtime.device.limits import supports_non_uniform_groups
    if supports_non_uniform_groups(engine.device):
        pytest.skip("this device runs non-uniform work-groups")
    registry.load_string(copy_layer(work='global="X,Y,B*F" local="1,1,4"'), {"copy.cl": COPY_CL})
    with pytest.raises(BindingError) as e:
        registry.bind("Copy", [TensorDesc((1, 2, 3, 6))])
    assert "local[2]=4 does not divide global[2]=2" in str(e.value)
    assert "(e.g. ((B*F)+3)/4*4)" in str(e.value)
