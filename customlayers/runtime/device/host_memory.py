"""Host memory without extra copies: pinned, mapped buffers, and numpy arrays used where they lie.

A PinnedTensor is a buffer allocated with ALLOC_HOST_PTR and mapped once, for the request's life:
the numpy array the user fills (or reads) is the mapped memory. On a discrete GPU the driver
transfers from (to) that page-locked memory by DMA, without the staging copy a pageable array
costs; on a CPU device (PoCL) it is the device's memory itself, so kernels use it in place.

On a CPU device a plain numpy input of the tensor's dtype, C-contiguous and aligned to its
element size is wrapped in a USE_HOST_PTR buffer for one run: the kernels read it where it lies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from ...jit.tensor import TensorDesc


@dataclass
class PinnedTensor:
    buffer: cl.Buffer
    array: np.ndarray          # the mapped memory, in the tensor's shape and dtype


def pinned_tensor(context, queue, desc: TensorDesc, role: str) -> PinnedTensor:
    """Allocate and map a pinned buffer for `desc` (a host wait for the map: setup, not a run)."""
    mf = cl.mem_flags
    # an output placed here may also be read by the layers after it: read-write
    access = mf.READ_ONLY if role == "input" else mf.READ_WRITE
    buf = cl.Buffer(context, access | mf.ALLOC_HOST_PTR, max(desc.nbytes, 1))
    array, _ = cl.enqueue_map_buffer(queue, buf, cl.map_flags.READ | cl.map_flags.WRITE, 0,
                                     desc.shape, desc.np_dtype, is_blocking=True)
    return PinnedTensor(buf, array)


def usable_in_place(array: np.ndarray, desc: TensorDesc) -> bool:
    """Whether a numpy input can be a kernel's buffer where it lies (on a CPU device)."""
    return (array.dtype == desc.np_dtype and array.flags.c_contiguous and
            array.flags.aligned and array.nbytes == desc.nbytes and array.nbytes > 0 and
            array.ctypes.data % array.dtype.itemsize == 0)


def wrap_in_place(context, array: np.ndarray) -> cl.Buffer | None:
    """A USE_HOST_PTR buffer over the array, or None when the driver refuses it (then the
    caller copies, as for any other array)."""
    try:
        return cl.Buffer(context, cl.mem_flags.READ_ONLY | cl.mem_flags.USE_HOST_PTR,
                         hostbuf=array)
    except (cl.Error, TypeError, ValueError, BufferError):
        return None


def constant_buffer(context, array: np.ndarray, unified: bool, queue=None) -> cl.Buffer:
    """A read-only buffer of a constant (weights) for the plan's life. Where host memory is the
    device's (`unified`: Engine.unified_memory, a CPU device) the array itself, where it lies
    (USE_HOST_PTR; pyopencl keeps the array alive with the buffer), when it starts where a
    buffer would (_base_alignment): a copy there is a second copy of the weights in the same
    memory (VGG-19's 548 MB on PoCL, issue 22). Elsewhere, a misaligned array, and where the
    driver refuses, a copy: written through `queue` (blocking: the buffer is whole before any
    request's queue reads it) where one is given, else at the buffer's creation (COPY_HOST_PTR).
    NVIDIA's driver copies a COPY_HOST_PTR buffer to the device only when a kernel first reads
    it: ResNet-50's 98 MB of weights cost the first inference 22-25 ms more than written
    buffers, whose writes took no longer than the creation (H200, 4 alternated rounds)."""
    array = np.ascontiguousarray(array)
    if array.nbytes == 0:
        array = np.zeros(1, np.uint8)
    if unified and array.ctypes.data % _base_alignment(context) == 0:
        buf = wrap_in_place(context, array)
        if buf is not None:
            return buf
    if queue is None:
        return cl.Buffer(context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                         hostbuf=array)
    buf = cl.Buffer(context, cl.mem_flags.READ_ONLY, array.nbytes)
    cl.enqueue_copy(queue, buf, array, is_blocking=True)
    return buf


def _base_alignment(context) -> int:
    """The alignment (bytes) the devices give a buffer's start (CL_DEVICE_MEM_BASE_ADDR_ALIGN,
    128 on PoCL): a kernel may read its argument as float16 or double16 vectors, which the
    compiler may load assuming that alignment; an array at a weights file's offset may have
    less, and is then copied."""
    return max(max(int(d.mem_base_addr_align) // 8, 1) for d in context.devices)
