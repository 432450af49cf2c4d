"""Argument forms a user reaches for first (found by a new-user trial): one TensorDesc where a
list is asked, one pyopencl.Event as wait_for, an array where run_layer takes a list, a string
where infer takes arrays. Each is taken as meant or named, never a raw TypeError or a message
about a shape []."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

from customlayers.api import (BindingError, Engine, Network, Registry, TensorDesc, TensorError,
                              run_layer)

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "examples" / "layers" / "relu" / "relu.xml"
DEMO = ROOT / "examples" / "models" / "demo_cnn_builtin.xml"      # input 'data' 1x3x32x32


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def test_bind_takes_one_tensordesc_as_a_list_of_one(engine):
    registry = Registry(engine)
    registry.load(str(RELU))
    bound = registry.bind("ReLU", TensorDesc((1, 2, 3, 4)), TensorDesc((1, 2, 3, 4)))
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(bound(x), np.maximum(x, 0))


def test_run_layer_names_an_array_given_for_the_list(engine):
    registry = Registry(engine)
    registry.load(str(RELU))
    with pytest.raises(BindingError, match=r"run_layer takes the inputs of layer 'ReLU' as a "
                                           r"list of arrays.*pass \[x\]"):
        run_layer(registry, "ReLU", np.ones((2, 2, 3, 4), np.float32))


@pytest.mark.parametrize("given,says", [
    ("data", r"the inputs are given as \{name: array\}, a list of arrays in input order "
             r"\(data\), or one array; found str 'data'"),
    (3, r"found int 3"),
    ({"data": "abc"}, r"input 'data': expected an array of numbers, found str 'abc'"),
])
def test_infer_names_inputs_that_are_no_arrays(engine, given, says):
    net = Network(DEMO, engine=engine)
    with pytest.raises(TensorError, match=says):
        net.infer(given)


def test_one_event_is_a_wait_list_of_one(engine):
    net = Network(DEMO, engine=engine)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = net.infer({"data": x})
    request = net.create_request()
    request.set_tensor("data", x)
    gate = cl.UserEvent(engine.context)
    request.start_async(wait_for=gate)
    gate.set_status(cl.command_execution_status.COMPLETE)
    got = request.wait()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
