"""SpaceToDepth / DepthToSpace against numpy and OpenVINO CPU."""
import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import run_launches


def _run(cl_env, op_type, x, **raw):
    op = get_op(op_type)
    attrs = op.parse_attributes({k: str(v) for k, v in raw.items()}, "layer")
    ins = [TensorDesc(x.shape)]
    (shape, dtype), = op.infer_shapes(attrs, ins, {})
    outs = [TensorDesc(shape, dtype)]
    return run_launches(cl_env, op.launches(attrs, ins, outs, {}), [x], ins, outs)[0]


def s2d_ref(x, s, mode):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // s, s, w // s, s)
    order = (0, 3, 5, 1, 2, 4) if mode == "blocks_first" else (0, 1, 3, 5, 2, 4)
    return t.transpose(order).reshape(n, c * s * s, h // s, w // s)


def d2s_ref(x, s, mode):
    n, c, h, w = x.shape
    if mode == "blocks_first":
        t = x.reshape(n, s, s, c // (s * s), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (s * s), s, s, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (s * s), h * s, w * s)


@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
@pytest.mark.parametrize("shape,s", [((1, 3, 4, 6), 2), ((2, 5, 9, 3), 3)])
def test_space_to_depth_and_back(cl_env, mode, shape, s):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y = _run(cl_env, "SpaceToDepth", x, block_size=s, mode=mode)
    np.testing.assert_array_equal(y, s2d_ref(x, s, mode))
    back = _run(cl_env, "DepthToSpace", y, block_size=s, mode=mode)
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(back, d2s_ref(y, s, mode))


def test_space_to_depth_matches_openvino(cl_env):
    ov = pytest.importorskip("openvino")  # a test-only oracle
    ops = pytest.importorskip("openvino.opset13")
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    for mode in ("blocks_first", "depth_first"):
        p = ops.parameter(x.shape, np.float32)
        m = ov.Model([ops.space_to_depth(p, mode, 3)], [p])
        ref = ov.Core().compile_model(m, "CPU")({0: x})[0]
        np.testing.assert_array_equal(_run(cl_env, "SpaceToDepth", x, block_size=3, mode=mode), ref)


def test_bad_block_size_is_named(cl_env):
    x = np.zeros((1, 3, 5, 5), np.float32)
    with pytest.raises(BindingError, match="multiples of block_size=2"):
        _run(cl_env, "SpaceToDepth", x, block_size=2, mode="blocks_first")


@pytest.mark.parametrize("op_type", ["SpaceToDepth", "DepthToSpace"])
@pytest.mark.parametrize("shape", [(1, 8, 4), (1, 8, 4, 4, 4)])
def test_a_rank_other_than_4_is_refused_in_a_model(tmp_path, op_type, shape):
    """A rank-3 or rank-5 input was a ValueError of unpacking four dims (IR and ONNX)."""
    from onnx import TensorProto, helper, save
    from customlayers.api import Network
    from customlayers.errors import CustomLayersError
    from model_files import write_ir
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"], blocksize=2, name="s")],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx_path = tmp_path / "m.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), onnx_path)
    ir_path = write_ir(tmp_path / "m.xml", op_type, [np.zeros(shape, np.float32)],
                       [np.zeros(shape, np.float32)], {"block_size": 2, "mode": "blocks_first"})
    for path in (onnx_path, ir_path):
        with pytest.raises(CustomLayersError) as e:
            Network(str(path))
        assert f"{op_type}: only rank-4 (N,C,H,W) inputs are supported, found " \
               f"{list(shape)}" in str(e.value)
