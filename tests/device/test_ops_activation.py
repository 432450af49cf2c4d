"""Activations (ops/tensor/activation.py) on the device against numpy references, a few against
OpenVINO's CPU plugin."""
import math

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.launch import DEFAULT_CONTEXT
from op_harness import CPU_CONTEXT, run_op, run_openvino

RNG = np.random.default_rng(11)
erf = np.vectorize(math.erf, otypes=[np.float64])


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


# op type, attributes, reference on float64, input transform (domain)
CASES = [
    ("ReLU", {}, lambda x: np.maximum(x, 0), None),
    ("Sigmoid", {}, lambda x: 1 / (1 + np.exp(-x)), None),
    ("Tanh", {}, np.tanh, None),
    ("Clamp", {"min": "-0.5", "max": "0.75"}, lambda x: np.clip(x, -0.5, 0.75), None),
    ("Elu", {"alpha": "0.3"}, lambda x: np.where(x > 0, x, 0.3 * np.expm1(x)), None),
    ("Exp", {}, np.exp, None),
    ("Log", {}, np.log, np.abs),
    ("Sqrt", {}, np.sqrt, np.abs),
    ("Abs", {}, np.abs, None),
    ("Negative", {}, np.negative, None),
    ("HSwish", {}, lambda x: x * np.clip(x + 3, 0, 6) / 6, None),
    ("HSigmoid", {}, lambda x: np.clip(x + 3, 0, 6) / 6, None),
    ("Swish", {}, lambda x: x / (1 + np.exp(-x)), None),
    ("Gelu", {}, lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), None),
    ("Gelu", {"approximation_mode": "tanh"}, gelu_tanh, None),
    ("Erf", {}, erf, None),
    ("Sin", {}, np.sin, None),
    ("Cos", {}, np.cos, None),
    ("Floor", {}, np.floor, None),
    ("Ceiling", {}, np.ceil, None),
    ("SoftPlus", {}, softplus, lambda x: x * 8),  # reaches past the threshold of 20
    ("Mish", {}, lambda x: x * np.tanh(softplus(x)), None),
]


# the CPU kernels' 16 outputs per work item do not depend on the function: a few functions run
# them (each case is a program PoCL compiles, 0.3-1 s apiece on a fresh machine)
_CPU_CASES = [c for c in CASES if c[0] in ("Sigmoid", "Clamp", "Gelu", "HSwish")]
RUNS = [c + (DEFAULT_CONTEXT,) for c in CASES] + [c + (CPU_CONTEXT,) for c in _CPU_CASES]


@pytest.mark.parametrize("op_type,attrs,ref,domain,ctx", RUNS,
                         ids=[f"{c[0]}{'-' + '-'.join(c[1].values()) if c[1] else ''}"
                              f"-{'cpu' if c[4] is CPU_CONTEXT else 'any'}" for c in RUNS])
def test_activation_matches_numpy(cl_env, op_type, attrs, ref, domain, ctx):
    # 210 elements: not a multiple of 64, nor of the CPU kernels' 16 per work item
    x = (RNG.standard_normal((2, 3, 5, 7)) * 3).astype(np.float32)
    if domain is not None:
        x = domain(x).astype(np.float32)
    got = run_op(cl_env, op_type, [x], attrs, ctx=ctx)[0]
    want = ref(x.astype(np.float64))
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("ctx", [DEFAULT_CONTEXT, CPU_CONTEXT], ids=["any", "cpu"])
@pytest.mark.parametrize("shape", [(7,), (3, 11), (1, 1, 1, 1), (2, 16), (3, 17)])
def test_relu_any_rank(cl_env, shape, ctx):
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(run_op(cl_env, "ReLU", [x], ctx=ctx)[0], np.maximum(x, 0))


def test_integer_activations(cl_env):
    x = np.array([-5, -2, 0, 1, 3, 9], np.int32)
    np.testing.assert_array_equal(run_op(cl_env, "ReLU", [x])[0], [0, 0, 0, 1, 3, 9])
    np.testing.assert_array_equal(run_op(cl_env, "Abs", [x])[0], np.abs(x))
    np.testing.assert_array_equal(run_op(cl_env, "Negative", [x])[0], -x)
    # integer Clamp rounds the bounds inwards: ceil(-2.5) = -2, floor(3.7) = 3
    got = run_op(cl_env, "Clamp", [x], {"min": "-2.5", "max": "3.7"})[0]
    np.testing.assert_array_equal(got, [-2, -2, 0, 1, 3, 3])


def test_float_only_activation_refuses_integers(cl_env):
    with pytest.raises(BindingError, match="Sigmoid: input of type i32 is not supported"):
        run_op(cl_env, "Sigmoid", [np.zeros(4, np.int32)])


def test_clamp_min_above_max_names_the_layer(cl_env):
    with pytest.raises(BindingError, match=r"layer 'c1' \(Clamp\): min=2.0 is above max=1.0"):
        run_op(cl_env, "Clamp", [np.zeros(4, np.float32)], {"min": "2", "max": "1"}, layer="c1")


def test_missing_required_attribute(cl_env):
    with pytest.raises(BindingError, match="attribute 'alpha' is required"):
        run_op(cl_env, "Elu", [np.zeros(4, np.float32)])


def test_gelu_unknown_mode(cl_env):
    with pytest.raises(BindingError, match="approximation_mode='fast' is not one of erf, tanh"):
        run_op(cl_env, "Gelu", [np.zeros(4, np.float32)], {"approximation_mode": "fast"})


def test_swish_with_beta_input(cl_env):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    beta = np.array([0.7], np.float32)
    got = run_op(cl_env, "Swish", [x, beta])[0]
    np.testing.assert_allclose(got, x / (1 + np.exp(-0.7 * x)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("data_shape,slope_shape", [
    ((2, 5, 3, 4), (5,)),       # per channel (dim 1), not numpy's trailing axis
    ((2, 4, 3, 4), (4,)),       # per channel, although numpy would also broadcast it on x
    ((3, 6), (6,)),
    ((2, 3, 4), (1,)),          # one slope for all
    ((2, 3, 4), (3, 4)),        # numpy broadcasting
])
def test_prelu(cl_env, data_shape, slope_shape):
    x = RNG.standard_normal(data_shape).astype(np.float32)
    slope = RNG.uniform(0.1, 0.5, slope_shape).astype(np.float32)
    if len(slope_shape) == 1 and len(data_shape) >= 2 and slope_shape[0] == data_shape[1]:
        s = slope.reshape((1, -1) + (1,) * (len(data_shape) - 2))
    else:
        s = slope
    got = run_op(cl_env, "PRelu", [x, slope])[0]
    np.testing.assert_allclose(got, np.where(x < 0, x * s, x), rtol=1e-6)


def test_prelu_bad_slope(cl_env):
    with pytest.raises(BindingError, match=r"PRelu: slope of shape \[7\] fits neither"):
        run_op(cl_env, "PRelu", [np.zeros((2, 3, 4), np.float32), np.zeros(7, np.float32)])


@pytest.mark.parametrize("op_type,attrs,builder", [
    ("Gelu", {}, lambda ops, x: ops.gelu(x, "erf")),
    ("Mish", {}, lambda ops, x: ops.mish(x)),
    ("HSwish", {}, lambda ops, x: ops.hswish(x)),
    ("Elu", {"alpha": "0.5"}, lambda ops, x: ops.elu(x, 0.5)),
    ("SoftPlus", {}, lambda ops, x: ops.softplus(x)),
])
def test_matches_openvino_cpu(cl_env, op_type, attrs, builder):
    ops = pytest.importorskip("openvino.opset13")
    x = (RNG.standard_normal((2, 3, 4, 5)) * 4).astype(np.float32)
    want = run_openvino(lambda p: builder(ops, p), [x])
    got = run_op(cl_env, op_type, [x], attrs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_prelu_matches_openvino_cpu(cl_env):
    ops = pytest.importorskip("openvino.opset13")
    x = RNG.standard_normal((2, 4, 3, 5)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    want = run_openvino(lambda p, s: ops.prelu(p, s), [x, slope])
    np.testing.assert_allclose(run_op(cl_env, "PRelu", [x, slope])[0], want, rtol=1e-6)
