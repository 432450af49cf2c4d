"""The kernel objects of requests. A request binds one pyopencl.Kernel per launch (its arguments
are set once), so a network holds as many kernels as it has launches: DenseNet-121 840, a network
of 60,000 nodes as many. Making them, setting their arguments and releasing them are kept cheap
here.

Made (memoize_kernel_invokers): every pyopencl.Kernel, when made, asks
pyopencl.invoker.generate_enqueue_and_set_args for the Python functions that set its arguments
and enqueue it. pyopencl keeps them in a disk cache without a memory cache (pytools'
WriteOncePersistentDict, in_mem_cache_size=0), so each Kernel read a file, unpickled it and
compiled its Python source again: 160 µs a kernel on the 2-core machine, 0.33 s of
DenseNet-121's 1.5 s warm load. The functions depend only on the key pyopencl caches them by
(the kernel's name, its argument count and types, the devices), so keeping them in memory per
key changes nothing but the time: 12 µs a Kernel. The C++ Kernel looks the function up in
pyopencl.invoker at each construction, so wrapping that attribute is what takes effect; the
wrapper passes whatever arguments it is given through, and a pyopencl without the function
(another version) keeps its own path.

Arguments (set_kernel_args): numpy scalars are declared by type, so that pyopencl packs them
in one call. One argument passed by value (set_arg_by_value: a numpy scalar, or an array as a
struct): Kernel.set_arg tries each kind of argument in turn before it takes the bytes, 9-14 µs
a call on this machine and on the GPU machine's host; its lower entry _set_arg_buf hands the
bytes to the driver in 0.3 µs (a streaming step sets one per step, stop 29).

Released (release_newest_first): PoCL keeps a program's kernels in a list, newest first, that
clReleaseKernel walks to find the one released: kernels released oldest first cost a walk past
every younger one, and releasing a network whose kernels went in the order a garbage collection
happened to clear them took 50 s (quadratic in the kernels). Released newest first, each is at
the head of its list: milliseconds for the lot. Other drivers do not care about the order; the
owners (InferRequest, Network) release in this one when they die.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np

_SERIALS = itertools.count()


def next_serial() -> int:
    """A number that orders the kernel owners by creation."""
    return next(_SERIALS)


def release_newest_first(launches: list) -> None:
    """Empty `launches` (a request's launch tuples, in creation order) from its end, so that each
    kernel's last reference goes in reverse creation order."""
    while launches:
        launches.pop()


def release_requests(requests) -> None:
    """Release the kernels of `requests`, the newest request first (see the module's text)."""
    for request in sorted(requests, key=lambda r: r.serial, reverse=True):
        request.release_kernels()


_lock = threading.Lock()
_installed = False


def memoize_kernel_invokers() -> None:
    """Wrap pyopencl.invoker.generate_enqueue_and_set_args with an in-memory cache (once)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        try:
            import pyopencl.invoker as invoker
        except ImportError:
            return
        generate = getattr(invoker, "generate_enqueue_and_set_args", None)
        if generate is None or getattr(generate, "_customlayers_memo", False):
            return
        made: dict[tuple, tuple] = {}

        def memoized(*args, **kwargs):
            # whatever pyopencl passes, by position or name: the key is all of it, a list
            # (the devices) as a tuple; a value that cannot be a key goes to pyopencl as it is
            try:
                key = (tuple(_hashable(a) for a in args),
                       tuple(sorted((k, _hashable(v)) for k, v in kwargs.items())))
                hash(key)
            except TypeError:
                return generate(*args, **kwargs)
            found = made.get(key)
            if found is None:
                found = made[key] = generate(*args, **kwargs)
            return found

        memoized._customlayers_memo = True
        invoker.generate_enqueue_and_set_args = memoized


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def set_arg_by_value(kernel, index: int, value) -> None:
    """kernel.set_arg(index, value) for a numpy scalar or array passed by value (its bytes),
    through pyopencl's lower entry where this pyopencl has it."""
    setter = getattr(kernel, "_set_arg_buf", None)
    if setter is None:
        kernel.set_arg(index, value)
    else:
        setter(index, value)


def set_kernel_args(kernel, args) -> None:
    """`kernel.set_args(*args)`, with each numpy scalar's type declared first where there are
    any (buffers and the rest untyped). pyopencl then packs the scalars by their struct format
    in one call instead of handing each to the driver through its buffer protocol: a
    convolution's 23 int32 arguments took 330 µs to set on PoCL, 33 µs declared (DenseNet-121
    binds 840 kernels per request, stop 28). A kernel of buffers only is set as it was: the
    declaration costs a check of the devices per call."""
    types = [arg.dtype if isinstance(arg, np.generic) else None for arg in args]
    if any(t is not None for t in types):
        kernel.set_arg_types(types)
    kernel.set_args(*args)
