"""The host side of Resize (ops/image/_resize_tables.py), without a device: the per-axis tap
tables, applied in float64, reproduce onnx's reference evaluator on every mode, and the output
shape follows scales, sizes, axes and keep_aspect_ratio_policy."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from customlayers.errors import BindingError  # noqa: E402
from customlayers.ops.image._resize_tables import (ResizeForm, axis_table,  # noqa: E402
                                                   output_plan, reference)

X = np.random.default_rng(3).standard_normal((1, 2, 5, 6)).astype(np.float32)


def _onnx_resize(attrs: dict, scales) -> np.ndarray:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, X.shape),
                                            helper.make_tensor_value_info("scales", 1, [4])],
                              [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, {"x": X,
                                                "scales": np.array(scales, np.float32)})[0]


@pytest.mark.parametrize("form", [
    ResizeForm("nearest", "asymmetric", "round_prefer_ceil"),
    ResizeForm("nearest", "half_pixel", "floor"),
    ResizeForm("linear", "align_corners"),
    ResizeForm("linear", "half_pixel", antialias=True),
    ResizeForm("cubic", "pytorch_half_pixel", cubic_a=-0.5, exclude_outside=True),
    ResizeForm("cubic", "half_pixel_symmetric", antialias=True),
])
@pytest.mark.parametrize("scales", [(1, 1, 1.8, 0.7), (1, 1, 0.4, 2.5)])
def test_tables_reproduce_the_reference(form, scales):
    out, factors, roi = output_plan("Resize", X.shape, form, np.array(scales, np.float32),
                                    None, None, None)
    tables = [axis_table(form, X.shape[a], out[a], factors[a], None) for a in range(4)]
    attrs = {"mode": form.mode, "coordinate_transformation_mode": form.coordinate_mode,
             "nearest_mode": form.nearest_mode, "cubic_coeff_a": form.cubic_a,
             "exclude_outside": int(form.exclude_outside), "antialias": int(form.antialias)}
    # 1e-5: the reference computes cubic weights with cubic_coeff_a as a float32 scalar, which
    # numpy 2 keeps in float32 arithmetic; the tables are float64 throughout
    np.testing.assert_allclose(reference(X, tables, 0.0), _onnx_resize(attrs, scales),
                               rtol=1e-5, atol=1e-5)


def test_output_shape_from_sizes_axes_and_policy():
    form = ResizeForm(policy="not_larger")
    out, factors, _ = output_plan("Resize", (1, 3, 20, 10), form, None,
                                  np.array([8, 8], np.int64), [2, 3], None)
    assert out == (1, 3, 8, 4) and factors[2] == factors[3] == 0.4
    out, _, _ = output_plan("Resize", (1, 3, 20, 10), ResizeForm(policy="not_smaller"), None,
                            np.array([8, 8], np.int64), [2, 3], None)
    assert out == (1, 3, 16, 8)


def test_an_empty_output_is_refused():
    with pytest.raises(BindingError, match=r"the output shape would be \[1, 1, 0, 6\]"):
        output_plan("Resize", (1, 1, 3, 6), ResizeForm(), np.array([1, 1, 0.2, 1], np.float32),
                    None, None, None)
