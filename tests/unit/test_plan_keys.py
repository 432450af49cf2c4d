"""runtime/compile/plan_keys.py without a device: the shapes a network compiles for at load, the
key that tells its plans apart, the checks on a value input's array."""
import numpy as np
import pytest

from customlayers.errors import ModelError
from customlayers.runtime.compile.plan_keys import (MAX_VALUE_INPUT_ELEMENTS, plan_key,
                                                   static_input_shapes, value_input_arrays)
from interop_graphs import chain


def test_static_shapes_take_the_given_and_name_an_unknown_input():
    graph = chain()
    declared = static_input_shapes(graph, {})
    assert declared is not None and set(declared) == {"x"}
    assert static_input_shapes(graph, {"x": [2, 3]}) == {"x": (2, 3)}
    with pytest.raises(ModelError, match="'z' is not an input of the model; its inputs: x"):
        static_input_shapes(graph, {"z": (1,)})
    with pytest.raises(ModelError, match="'w', 'z' are not inputs of the model; its inputs: x"):
        static_input_shapes(graph, {"z": (1,), "w": (1,)})


def test_the_key_is_the_shapes_and_values_in_name_order():
    a = plan_key({"b": (2,), "a": (1, 3)}, {"s": np.array([4, 5])})
    assert a == plan_key({"a": [1, 3], "b": [2]}, {"s": np.array([[4], [5]])})
    assert a != plan_key({"a": (1, 3), "b": (2,)}, {"s": np.array([4, 6])})


def test_a_value_input_is_given_small_and_of_its_shape():
    graph, why = chain(), {"x": "input 1 of layer 'r' (Reshape)"}
    got = value_input_arrays(graph, why, {"x": [2, 3]}, {})
    assert got["x"].tolist() == [2, 3]
    with pytest.raises(ModelError, match="give its value"):
        value_input_arrays(graph, why, {}, {})
    with pytest.raises(ModelError, match=f"at most {MAX_VALUE_INPUT_ELEMENTS} numbers"):
        value_input_arrays(graph, why, {"x": np.zeros(MAX_VALUE_INPUT_ELEMENTS + 1)}, {})
    with pytest.raises(ModelError, match="has shape \\[2\\], but shape \\[3\\] was given"):
        value_input_arrays(graph, why, {"x": [2, 3]}, {"x": (3,)})
