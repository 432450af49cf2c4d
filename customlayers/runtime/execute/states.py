"""A request's states: the variables of a stateful model (OpenVINO's ReadValue/Assign,
ops/tensor/state.py), one device buffer each, owned by the request for its life and never
copied to the host between runs. The API has OpenVINO's names: `request.query_state()` gives
VariableState objects (`name`, `state`: a numpy copy, `set_state(array)`, `reset()`), and
`request.reset_state()` resets them all.

Each ReadValue kernel takes a flag (jit/launch.py Arg.state_flag): 1 when its state holds what
a run's Assign or set_state wrote, 0 after a reset (it then reads its init, else zeros). The
flag is a kernel argument, set before a run only where it changed. A state reads as zeros
after a reset and before the first run, as OpenVINO's CPU plugin gives it.
"""
from __future__ import annotations

import weakref

import numpy as np
import pyopencl as cl

from ...errors import ExecutionError, TensorError
from ...jit.layer import state_ref
from ..device.kernel_objects import set_arg_by_value


class RequestStates:
    """The state buffers of one request and whether each holds a written value."""

    def __init__(self, request, plan):
        # no reference cycle: a request is freed (and its device memory given back, as
        # device_memory.py counts it) once its user drops it
        self._request = weakref.ref(request)
        self.descs = dict(plan.states)                  # key -> TensorDesc
        self.buffers = {key: cl.Buffer(request.context,
                                       cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                       hostbuf=np.zeros(max(desc.nbytes, 1), np.uint8))
                        for key, desc in self.descs.items()}
        self.written = {key: False for key in self.descs}
        self.assigned = assigned(plan)                  # written by every run
        self._flags: dict = {}        # key -> [(kernel, argument index)]: the ReadValues' flags
        self._bound: dict = {}        # key -> the flag the kernels hold now

    def __contains__(self, key) -> bool:
        return key in self.buffers

    def flag_use(self, variable: str, kernel, position: int) -> np.int32:
        """A ReadValue kernel's flag argument (request_args.py binds it here)."""
        key = state_ref(variable)
        self._flags.setdefault(key, []).append((kernel, position))
        self._bound[key] = False
        return np.int32(0)

    def forget_kernels(self) -> None:
        """Drop the references to the kernels (the request releases them in its order)."""
        self._flags = {}

    def before_run(self) -> None:
        """Set the flags that changed since the last run; the kernels are enqueued next."""
        for key, uses in self._flags.items():
            want = self.written.get(key, False)
            if self._bound[key] != want:
                for kernel, position in uses:
                    set_arg_by_value(kernel, position, np.int32(want))
                self._bound[key] = want

    def after_start(self) -> None:
        """The run is enqueued: the states it assigns hold its values for the next run."""
        for key in self.assigned:
            self.written[key] = True

    # -- the API ---------------------------------------------------------------------------
    def query(self) -> list["VariableState"]:
        return [VariableState(self, key) for key in self.descs]

    def reset_all(self) -> None:
        for key in self.descs:
            self.reset(key)

    def reset(self, key) -> None:
        self.request._refuse_while_running(f"reset of state '{key[1]}'")
        desc = self.descs[key]
        if desc.nbytes:
            cl.enqueue_copy(self._queue(), self.buffers[key], np.zeros(desc.nbytes, np.uint8),
                            is_blocking=True)
        self.written[key] = False

    def read(self, key) -> np.ndarray:
        self.request._refuse_while_running(f"state '{key[1]}'")
        desc = self.descs[key]
        host = np.empty(desc.shape, desc.np_dtype)
        if desc.nbytes:
            cl.enqueue_copy(self._queue(), host, self.buffers[key], is_blocking=True)
        return host

    def write(self, key, value) -> None:
        name = key[1]
        self.request._refuse_while_running(f"set_state of state '{name}'")
        desc = self.descs[key]
        array = np.asarray(value)
        if tuple(array.shape) != tuple(desc.shape):
            raise TensorError(f"state '{name}': set_state got shape {list(array.shape)}; the "
                              f"state is {list(desc.shape)} {desc.dtype}")
        if array.dtype.kind not in "biuf" or \
                not np.can_cast(array.dtype, desc.np_dtype, casting="same_kind"):
            raise TensorError(f"state '{name}': set_state got {array.dtype} values; the state "
                              f"holds {desc.np_dtype} (expected numbers of that kind)")
        host = np.ascontiguousarray(array, dtype=desc.np_dtype)
        if desc.nbytes:
            cl.enqueue_copy(self._queue(), self.buffers[key], host, is_blocking=True)
        self.written[key] = True

    @property
    def request(self):
        request = self._request()
        if request is None:
            raise ExecutionError("the request of this state was released")
        return request

    def _queue(self):
        """The request's queue: nothing of the request runs (it is not busy), and a blocking
        copy there is ordered after its last run on any queue."""
        return self.request.queue


def assigned(plan) -> frozenset:
    """The state keys some step of the plan writes (an Assign): written by every run."""
    return frozenset(k for s in plan.steps for k in s.outputs if k in plan.states)


class VariableState:
    """One state of a request, with OpenVINO's names (ov.VariableState)."""

    def __init__(self, states: RequestStates, key):
        self._states = states
        self._key = key
        self._request = states.request      # the request lives as long as its states are used

    @property
    def name(self) -> str:
        return self._key[1]

    @property
    def state(self) -> np.ndarray:
        """A numpy copy of the state's value now (zeros after a reset)."""
        return self._states.read(self._key)

    @state.setter
    def state(self, value) -> None:
        self.set_state(value)

    def set_state(self, value) -> None:
        """Write the state (its shape and a dtype of the same kind): the next run reads it."""
        self._states.write(self._key, value)

    def reset(self) -> None:
        """Back to its start: the next run reads the init (else zeros)."""
        self._states.reset(self._key)

    def __repr__(self) -> str:
        desc = self._states.descs[self._key]
        return f"VariableState('{self.name}', {list(desc.shape)} {desc.dtype})"
