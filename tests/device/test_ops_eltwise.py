"""Binary elementwise ops (ops/tensor/eltwise.py) on the device against numpy, and a few against
OpenVINO's CPU plugin."""
import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.launch import DEFAULT_CONTEXT
from op_harness import CPU_CONTEXT, run_op, run_openvino

RNG = np.random.default_rng(7)

FLOAT_REF = {
    "Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply, "Divide": np.divide,
    "Maximum": np.maximum, "Minimum": np.minimum,
    "Power": lambda a, b: np.power(np.abs(a) + 0.5, b),
    "SquaredDifference": lambda a, b: (a - b) ** 2,
}

# (shape a, shape b): equal, scalar, per-channel, both broadcast, rank mismatch, odd sizes
SHAPES = [
    ((2, 3, 5, 7), (2, 3, 5, 7)),
    ((2, 3, 5, 7), ()),
    ((1, 6, 4, 4), (1, 6, 1, 1)),
    ((3, 1, 5), (1, 4, 1)),
    ((4, 1, 9, 3), (9, 1)),
    ((13,), (2, 3, 13)),
    ((1, 1, 1, 1), (2, 1, 3, 1)),
    ((1, 8, 13, 11), (1, 8, 1, 1)),     # CPU: runs of 16 across channel planes, a tail of 8
]


# the CPU kernels' 16 outputs per work item do not depend on the op: every shape with a few
# ops (each case is a program PoCL compiles, 0.3-1 s apiece on a fresh machine)
CASES = [(op, shapes, DEFAULT_CONTEXT) for op in sorted(FLOAT_REF) for shapes in SHAPES] + \
    [(op, shapes, CPU_CONTEXT) for op in ("Add", "Divide", "Power") for shapes in SHAPES]


@pytest.mark.parametrize("op_type,shapes,ctx", CASES,
                         ids=[f"{c[0]}-{c[1][0]}-{c[1][1]}-{'cpu' if c[2] is CPU_CONTEXT else 'any'}"
                              for c in CASES])
def test_float_ops_broadcast_like_numpy(cl_env, op_type, shapes, ctx):
    a = RNG.standard_normal(shapes[0]).astype(np.float32)
    b = RNG.standard_normal(shapes[1]).astype(np.float32)
    if op_type == "Divide":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    if op_type == "Power":  # keep the base positive: the reference adds the same shift
        got = run_op(cl_env, op_type, [np.abs(a) + 0.5, b], ctx=ctx)[0]
    else:
        got = run_op(cl_env, op_type, [a, b], ctx=ctx)[0]
    want = FLOAT_REF[op_type](a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_integer_divide_floors_by_default_and_truncates_on_request(cl_env):
    a = np.array([7, -7, 7, -7, 0, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, 0], np.int32)
    floor = run_op(cl_env, "Divide", [a, b])[0]
    np.testing.assert_array_equal(floor, [3, -4, -4, 3, 0, 0])  # x/0 gives 0, no trap
    trunc = run_op(cl_env, "Divide", [a, b], {"python_division": "false"})[0]
    np.testing.assert_array_equal(trunc, [3, -3, -3, 3, 0, 0])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_ops(cl_env, dtype):
    a = RNG.integers(-20, 20, (3, 4)).astype(dtype)
    b = RNG.integers(1, 4, (4,)).astype(dtype)
    for op_type, ref in [("Add", np.add), ("Subtract", np.subtract), ("Multiply", np.multiply),
                         ("Maximum", np.maximum), ("Minimum", np.minimum),
                         ("Power", np.power), ("SquaredDifference", lambda x, y: (x - y) ** 2)]:
        got = run_op(cl_env, op_type, [a, b])[0]
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, ref(a, b), err_msg=op_type)


def test_incompatible_shapes_name_the_dims(cl_env):
    with pytest.raises(BindingError, match=r"do not broadcast.*\[3, 5\].*axis 1"):
        run_op(cl_env, "Add", [np.zeros((2, 3), np.float32), np.zeros((2, 5), np.float32)])


def test_auto_broadcast_none_needs_equal_shapes(cl_env):
    with pytest.raises(BindingError, match="auto_broadcast='none' needs equal shapes"):
        run_op(cl_env, "Add", [np.zeros((2, 3), np.float32), np.zeros((3,), np.float32)],
               {"auto_broadcast": "none"})
    got = run_op(cl_env, "Add", [np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)],
                 {"auto_broadcast": "none"})[0]
    np.testing.assert_array_equal(got, np.full((2, 3), 2, np.float32))


def test_unsupported_broadcast_mode_names_the_layer(cl_env):
    with pytest.raises(BindingError, match=r"layer 'sum1' \(Add\): auto_broadcast='pdpd' is not "
                                           r"supported; expected one of numpy, none"):
        run_op(cl_env, "Add", [np.zeros(2, np.float32)] * 2, {"auto_broadcast": "pdpd"},
               layer="sum1")


@pytest.mark.parametrize("op_type,builder", [
    ("Add", "add"), ("Multiply", "multiply"), ("SquaredDifference", "squared_difference"),
    ("Maximum", "maximum"),
])
def test_matches_openvino_cpu(cl_env, op_type, builder):
    ops = pytest.importorskip("openvino.opset13")
    a = RNG.standard_normal((2, 8, 3, 5)).astype(np.float32)
    b = RNG.standard_normal((8, 1, 5)).astype(np.float32)
    want = run_openvino(lambda x, y: getattr(ops, builder)(x, y), [a, b])
    got = run_op(cl_env, op_type, [a, b])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
