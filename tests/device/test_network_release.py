"""Issue 22, item 4 (the test suite's memory): a network nobody holds is freed by the first
garbage collection that finds it, with its requests, plans and buffers.

A network and its pooled requests are a reference cycle (the network pools the requests, each
request holds its network), so only the collector frees them; a finalizer that made the
collector count them as resurrected kept every dropped network, VGG-19's 1.1 GB included,
until a later full collection, which a long process (the test suite: 7.6 GB) rarely runs."""
from __future__ import annotations

import gc

import numpy as np
from onnx import helper

from customlayers.api import InferRequest, Network
from single_node_models import model_file


def _alive(kind) -> int:
    return sum(isinstance(o, kind) for o in gc.get_objects())


def test_a_dropped_network_and_its_requests_go_in_one_collection(tmp_path, cl_env):
    from customlayers.runtime.device.device import Engine
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    path = model_file(tmp_path / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                      {"x": x})
    engine = Engine.from_queue(cl_env[1])
    gc.collect()
    networks, requests = _alive(Network), _alive(InferRequest)
    net = Network(path, engine=engine)
    np.testing.assert_array_equal(net.infer({"x": x})["y"], np.maximum(x, 0))
    held = net.create_request()          # a request of the user's, dropped with the network
    held.infer({"x": x})
    del net, held
    gc.collect()                         # one collection, as the collector's own would be
    assert _alive(Network) <= networks
    assert _alive(InferRequest) <= requests
