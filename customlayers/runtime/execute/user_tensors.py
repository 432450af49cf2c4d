"""What a user hands a request for one of its tensors (InferRequest.set_tensor), checked once.

A value is a numpy array (copied to the device when the request runs, or used where it lies on a
CPU device), a pyopencl.Buffer (dense, in the tensor's dtype and shape: only its size can be
checked) or a pyopencl.array.Array (shape and dtype checked, its offset honoured). Every check
names the tensor and says what was expected against what was found; nothing here enqueues
anything, so a refused value changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ...errors import ModelError, TensorError
from ...jit.tensor import TensorDesc
from ..device.sub_buffers import SubBuffers


@dataclass
class DeviceTensor:
    """A device buffer the network reads (an input) or writes in place (an output).

    buffer: what kernels are bound to (a sub-buffer when the user's array has an aligned offset)
    base, offset: the user's allocation and the tensor's byte offset in it (for overlap checks
    and for the device-side copy an unaligned offset needs)
    """
    name: str
    buffer: cl.Buffer
    base: cl.Buffer
    offset: int
    nbytes: int
    keep: object = None        # the user's object, kept alive while the request holds it
    owner: SubBuffers | None = None    # releases a sub-buffer `buffer` before `base`

    @property
    def bindable(self) -> bool:
        """Kernels can take it as their argument (no offset left to apply)."""
        return self.buffer is not None

    def overlaps(self, other: "DeviceTensor") -> bool:
        return (self.base.int_ptr == other.base.int_ptr and
                self.offset < other.offset + other.nbytes and
                other.offset < self.offset + self.nbytes)


def _expected(desc: TensorDesc) -> str:
    return f"{desc.nbytes} bytes ({list(desc.shape)} {desc.dtype})"


def host_array(name: str, role: str, value, desc: TensorDesc) -> np.ndarray:
    """A numpy value checked against the tensor: numbers, the shape (ModelError, as infer has
    always said). Inputs are converted to the tensor's dtype (as infer does); an output array
    must have it, since it is written (TensorError)."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":      # complex, object, text: no silent cast
        raise ModelError(f"{role} '{name}' holds {array.dtype} values; the network takes "
                         f"{desc.np_dtype} (numbers)")
    if tuple(array.shape) != tuple(desc.shape):
        raise ModelError(f"{role} '{name}' has shape {list(array.shape)}; the network was "
                         f"compiled for {list(desc.shape)}")
    if role == "output":
        if array.dtype != desc.np_dtype:
            raise TensorError(f"output '{name}': expected an array of {desc.np_dtype}, found "
                              f"{array.dtype} (the output is written into it)")
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise TensorError(f"output '{name}': expected a writeable C-contiguous array "
                              f"(the output is written into it)")
    return array


def device_tensor(name: str, role: str, value, desc: TensorDesc, engine) -> DeviceTensor:
    """A pyopencl Buffer or Array checked against the tensor and the engine's context."""
    if isinstance(value, cla.Array):
        return _from_array(name, role, value, desc, engine)
    buf = value
    _check_context(name, role, buf.context, engine)
    if buf.size < desc.nbytes:
        raise TensorError(f"{role} '{name}': buffer too small: expected at least "
                          f"{_expected(desc)}, found {buf.size} bytes")
    return DeviceTensor(name, buf, buf, 0, desc.nbytes, keep=buf)


def _from_array(name: str, role: str, arr: cla.Array, desc: TensorDesc,
                engine) -> DeviceTensor:
    if arr.dtype != desc.np_dtype:
        raise TensorError(f"{role} '{name}': expected a pyopencl array of {desc.np_dtype}, "
                          f"found {arr.dtype}")
    if tuple(arr.shape) != tuple(desc.shape):
        raise TensorError(f"{role} '{name}': expected shape {list(desc.shape)}, found "
                          f"{list(arr.shape)}")
    if not arr.flags.c_contiguous:
        raise TensorError(f"{role} '{name}': expected a C-contiguous pyopencl array, found "
                          f"strides {list(arr.strides)}")
    if arr.queue is not None and arr.queue.device != engine.device:
        raise TensorError(f"{role} '{name}': the array's queue is on "
                          f"'{arr.queue.device.name.strip()}'; the network runs on "
                          f"'{engine.device.name.strip()}'")
    base = arr.base_data
    if base is None:             # an empty array has no allocation
        raise TensorError(f"{role} '{name}': expected {_expected(desc)}, found an array with "
                          f"no device memory")
    _check_context(name, role, base.context, engine)
    offset = int(arr.offset)
    if offset + desc.nbytes > base.size:
        raise TensorError(f"{role} '{name}': buffer too small: expected {_expected(desc)} at "
                          f"offset {offset}, found {base.size} bytes in all")
    if offset == 0:
        return DeviceTensor(name, base, base, 0, desc.nbytes, keep=arr)
    align = max(int(engine.device.mem_base_addr_align) // 8, 1)
    # a sub-buffer is the same memory; its origin must be aligned as the device requires.
    # Otherwise kernels cannot be bound to it: a device-side copy honours the offset instead.
    if offset % align:
        return DeviceTensor(name, None, base, offset, desc.nbytes, keep=arr)
    owner = SubBuffers()
    return DeviceTensor(name, owner.cut(base, offset, desc.nbytes), base, offset, desc.nbytes,
                        keep=arr, owner=owner)


def _check_context(name: str, role: str, context, engine) -> None:
    if context != engine.context:
        devices = ", ".join(d.name.strip() for d in context.devices)
        raise TensorError(f"{role} '{name}': the buffer belongs to another OpenCL context (on "
                          f"{devices}); expected one of the network's context (on "
                          f"'{engine.device.name.strip()}'): make the engine with "
                          f"Engine.from_context or Engine.from_queue")


def is_device_value(value) -> bool:
    return isinstance(value, (cl.Buffer, cla.Array))
