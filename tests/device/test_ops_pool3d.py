"""3-D (N,C,D,H,W) MaxPool / AvgPool built-ins on the test device against a numpy reference:
strides, pads, dilations, ceil rounding, AvgPool with and without the padding counted, and
MaxPool-8's flat indices."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import run_launches


def j(v):
    return ", ".join(map(str, v))


def run_pool(cl_env, op_type, raw, x):
    op = get_op(op_type)
    attrs = op.parse_attributes(raw, "pool3d")
    descs = [TensorDesc(x.shape)]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
    launches = op.launches(attrs, descs, out_descs, {})
    return run_launches(cl_env, launches, [x], descs, out_descs)


def pool3d_ref(x, kind, kernel, strides, pads, out, dilations=(1, 1, 1), count_pad=False):
    """Every output cell's window over the in-bounds input cells; (values, flat argmax)."""
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    values = np.zeros((n, c) + tuple(out))
    index = np.zeros((n, c) + tuple(out), np.int64)
    for o in itertools.product(*(range(d) for d in out)):
        cells = [p for p in itertools.product(*(
            [o[a] * strides[a] - pads[a] + k * dilations[a] for k in range(kernel[a])]
            for a in range(3))) if all(0 <= p[a] < spatial[a] for a in range(3))]
        if not cells:
            continue
        win = np.stack([x[(slice(None), slice(None)) + p] for p in cells], -1)
        if kind == "max":
            best = win.argmax(-1)
            values[(slice(None), slice(None)) + o] = win.max(-1)
            flat = np.array([np.ravel_multi_index(cells[b], spatial) for b in best.ravel()])
            index[(slice(None), slice(None)) + o] = flat.reshape(n, c)
        else:
            div = np.prod(kernel) if count_pad else len(cells)
            values[(slice(None), slice(None)) + o] = win.sum(-1) / div
    return values, index


CASES = [
    # kernel, strides, pads_begin, pads_end, rounding, dilations, output D,H,W for 5x6x7
    ((2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), "floor", (1, 1, 1), (2, 3, 3)),
    ((3, 3, 3), (1, 2, 2), (1, 1, 1), (1, 1, 1), "floor", (1, 1, 1), (5, 3, 4)),
    ((2, 3, 2), (2, 2, 3), (0, 1, 0), (0, 1, 1), "ceil", (1, 1, 1), (3, 4, 3)),
    ((2, 2, 2), (1, 1, 1), (0, 0, 0), (0, 0, 0), "floor", (2, 1, 2), (3, 5, 5)),
]


@pytest.mark.parametrize("kernel,strides,pb,pe,rounding,dil,out", CASES)
def test_max_pool_3d_matches_numpy(cl_env, kernel, strides, pb, pe, rounding, dil, out):
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    raw = {"kernel": j(kernel), "strides": j(strides), "pads_begin": j(pb), "pads_end": j(pe),
           "rounding_type": rounding, "dilations": j(dil), "index_element_type": "i64"}
    values, index = run_pool(cl_env, "MaxPool", raw, x)
    want, want_index = pool3d_ref(x, "max", kernel, strides, pb, out, dil)
    assert values.shape == (2, 3) + out
    np.testing.assert_array_equal(values, want.astype(np.float32))
    # indices are flat over the whole tensor (axis 0), as MaxPool-8 defines them
    plane = np.arange(6).reshape(2, 3, 1, 1, 1) * (5 * 6 * 7)
    np.testing.assert_array_equal(index, want_index + plane)


@pytest.mark.parametrize("count_pad", [False, True])
@pytest.mark.parametrize("kernel,strides,pb,pe,rounding,dil,out", CASES[:3])
def test_avg_pool_3d_matches_numpy(cl_env, kernel, strides, pb, pe, rounding, dil, out,
                                   count_pad):
    x = np.random.default_rng(2).standard_normal((1, 2, 5, 6, 7)).astype(np.float32)
    raw = {"kernel": j(kernel), "strides": j(strides), "pads_begin": j(pb), "pads_end": j(pe),
           "rounding_type": rounding, "exclude-pad": "false" if count_pad else "true"}
    (got,) = run_pool(cl_env, "AvgPool", raw, x)
    padded = any(pb) or any(pe)
    want, _ = pool3d_ref(x, "avg", kernel, strides, pb, out, count_pad=count_pad and padded)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
