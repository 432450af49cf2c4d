"""RequestStream: Network.streaming() for a model that carries its own state: OpenVINO's
ReadValue/Assign, or ONNX CausalConvWithState's past_state/present_state bound to a variable
(passes/state/binding.py). Each step is one inference on the stream's own request, the state
kept on the device between steps (runtime/execute/states.py), so a streamed model of either kind
is driven alike: step(), reset(), t, query_state()."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ...errors import TensorError


class RequestStream:
    """step(inputs) -> {output name: array}: one inference, the state carried to the next.
    inputs: the model's one input as an array, or {name: array}. The request is made for the
    first step's shapes; every later step has them too (a state holds one shape)."""

    def __init__(self, network):
        self.network = network
        self.t = 0
        self._request = None
        self._shapes = None

    def step(self, inputs) -> dict[str, np.ndarray]:
        arrays = self.network._named_inputs(inputs)
        shapes = {n: tuple(a.shape) for n, a in arrays.items()}
        if self._request is None:
            values = {n: arrays[n] for n in self.network.value_inputs if n in arrays}
            self._request = self.network.create_request(shapes, values)
            self._shapes = shapes
        elif shapes != self._shapes:
            raise TensorError(f"streaming: a step of shapes {_shown(shapes)}; this stream's "
                              f"request runs {_shown(self._shapes)} (its state holds one "
                              f"shape): open another stream for other shapes")
        outputs = self._request.infer(arrays)
        self.t += 1
        return outputs

    def reset(self) -> None:
        """Every state back to its start (zeros, or the model's init at the next step)."""
        self.t = 0
        if self._request is not None:
            self._request.reset_state()

    def query_state(self) -> list:
        """The request's states (.name, .state, set_state(), reset()): zeros after a reset.
        Before the first step, those of a request made for the model's declared input shapes
        where it declares them all (zeros, as OpenVINO's before a run), which the steps then
        run; else none (a state's shape comes with the first step's)."""
        if self._request is None and self.network._default_key is not None:
            (shapes, _values) = self.network._default_key
            self._request = self.network.create_request()
            self._shapes = dict(shapes)
        return self._request.query_state() if self._request is not None else []

    @property
    def request(self):
        """The request the steps run on (None before the first)."""
        return self._request


def _shown(shapes: Mapping[str, tuple]) -> str:
    return ", ".join(f"{n} {list(s)}" for n, s in shapes.items())
