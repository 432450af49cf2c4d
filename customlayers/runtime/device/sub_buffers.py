"""Sub-buffers owned with their parents, released before them, never by the garbage collector.

A sub-buffer (clCreateSubBuffer) shares its parent's memory. OpenCL says a parent outlives its
sub-buffers whatever order they are released in, but NVIDIA's driver does not survive a parent
released first: the process died in garbage collection, or at exit, once a network had put
Concat inputs in place (each a sub-buffer of the Concat's output). On the H100 the release of
such a sub-buffer segfaulted once the network's context had been released before it (a network
with a context of its own, freed by the garbage collector: a reference cycle is cleared in any
order). Python gives no order: a request's attributes, a dataclass's fields and a tuple's items
are dropped in an order of their own (a tuple's last item first). So every sub-buffer is made
here, by an owner that holds its parent and its context too, and `release()` (also run when the
owner is dropped) releases each sub-buffer explicitly, then lets go of the parents, then of the
contexts.
"""
from __future__ import annotations

import pyopencl as cl


class SubBuffers:
    """The sub-buffers one object (a request, a tensor, a guarded launch) cuts from buffers."""

    def __init__(self):
        # (parent's handle, origin, size) -> (sub-buffer, parent): the parent stays referenced
        # for as long as its sub-buffer lives
        self._made: dict[tuple[int, int, int], tuple[cl.Buffer, cl.Buffer]] = {}
        # the contexts of the parents (a reference each), let go of last
        self._contexts: list[cl.Context] = []

    def cut(self, parent: cl.Buffer, origin: int, nbytes: int) -> cl.Buffer:
        """The sub-buffer of `parent` at byte `origin`, `nbytes` long (one per region)."""
        key = (parent.int_ptr, origin, nbytes)
        made = self._made.get(key)
        if made is None:
            if not self._contexts or self._contexts[-1] != parent.context:
                self._contexts.append(parent.context)
            made = self._made[key] = (parent.get_sub_region(origin, nbytes), parent)
        return made[0]

    def release(self) -> None:
        """Release every sub-buffer now, then drop the references to their parents (which are
        released when nothing else holds them). Safe to call twice."""
        made, self._made = self._made, {}
        for sub, _parent in made.values():
            try:
                sub.release()
            except cl.Error:                 # already released, or the context is gone
                pass
        made.clear()                         # the parents' references go only now
        self._contexts = []                  # and the contexts' last

    def __len__(self) -> int:
        return len(self._made)

    def __del__(self):
        self.release()


# bytes: sub-buffers on a GPU start at a page (see sub_buffer_alignment)
GPU_SUB_BUFFER_ALIGN = 4096


def sub_buffer_alignment(engine) -> int:
    """Bytes a sub-buffer's origin (a Concat slice's) is a multiple of: what the device asks
    for (it says it in bits), and a whole page on a device that is no CPU. NVIDIA asks for 512
    bytes, but a network whose slices started between pages segfaulted in its driver when their
    sub-buffers were released (tests/device/test_concat_in_place.py, the light models); every
    slice placed at a page held."""
    align = max(int(engine.device.mem_base_addr_align) // 8, 1)
    if engine.unified_memory:               # a CPU device
        return align
    return max(align, GPU_SUB_BUFFER_ALIGN)
