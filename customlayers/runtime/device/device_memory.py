"""Device memory, checked before anything is allocated.

No driver can be trusted to refuse an allocation it cannot hold: PoCL (a CPU device) hands out
buffers past its own CL_DEVICE_GLOBAL_MEM_SIZE until the kernel's OOM killer ends the process
(four 6 GiB tensors grew one to 23.6 GB), and NVIDIA's driver answers only at the first launch.
So every path that allocates device buffers says first what it will allocate at once, and this
module refuses it, naming the figures: any one buffer over CL_DEVICE_MAX_MEM_ALLOC_SIZE, or all
of them together over CL_DEVICE_GLOBAL_MEM_SIZE.

Two paths allocate: a network's request (its compiled plan: intermediate buffers, inputs,
constants, the layers' constant arguments and scratch buffers; compiler.py checks the plan) and
a bound kernel run alone (its inputs, outputs and Data blobs; Registry.bind checks them, so
run-layer, check and validate --check-bounds refuse before their first buffer).

A plan that fits may still not fit several times: each request allocates its own buffers
(benchmark -nireq, Network.stream, threads), and a network keeps a plan per input shape. So
requests also `reserve` what they allocate in a ledger per device, held while the request (and,
for the constants every request of a plan shares, the plan) lives: a request that would take
the device's memory past its size is refused with what is held already.
"""
from __future__ import annotations

import gc
import threading
import weakref
from typing import Sequence

from ...errors import DeviceError

# what a buffer is: (bytes, how a message names it: "output 0 of layer 'conv1' (Convolution)")
Need = tuple[int, str]


def check_fits(device, buffers: Sequence[Need], whole: str, *, total: int | None = None,
               advice: str = "give smaller input shapes (or a batch of fewer items)") -> None:
    """DeviceError when one of `buffers` is over the device's largest allocation, or `total`
    bytes (default: the buffers' sum) over its global memory. `whole` names what needs them all
    ("the network", "layer 'Shift'")."""
    limit, memory = int(device.max_mem_alloc_size), int(device.global_mem_size)
    name = device.name.strip()
    for nbytes, what in buffers:
        if nbytes > limit:
            raise DeviceError(f"{what} needs {mib(nbytes)} in one buffer, but device '{name}' "
                              f"allocates at most {mib(limit)} per buffer; {advice}")
    total = sum(n for n, _ in buffers) if total is None else total
    if total > memory:
        largest = sorted(buffers, key=lambda b: -b[0])[:3]
        listed = "; ".join(f"{what} {mib(n)}" for n, what in largest)
        raise DeviceError(f"{whole} needs {mib(total)} of device memory at once, but device "
                          f"'{name}' has {mib(memory)} (the largest buffers: {listed}); "
                          f"{advice}")


_held: dict[int, int] = {}          # device (its cl_device_id) -> bytes reserved, all owners
_lock = threading.Lock()
# releases of owners that died, applied under the lock by its next holder (_settle): a
# finalizer never takes the lock, because a collection may run it while this very thread holds
# it (Python 3.12 runs a collection at any later bytecode, not where it allocated: one started
# inside `with _lock` and a release waiting on the lock hung the process)
_released: list[tuple[int, int]] = []


def _settle() -> None:
    """Apply the releases waiting (under the lock)."""
    while _released:
        key, nbytes = _released.pop()
        _held[key] = max(_held.get(key, 0) - nbytes, 0)


def held(device) -> int:
    """Bytes reserved on `device` by the requests and plans alive in this process."""
    with _lock:
        _settle()
        return _held.get(device.int_ptr, 0)


def reserve(device, nbytes: int, owner, what: str,
            advice: str = "use fewer requests at once, or release networks and requests no "
                          "longer used") -> None:
    """Reserve `nbytes` of `device` for as long as `owner` lives; DeviceError with the figures
    when they do not fit beside what is reserved already (objects only a reference cycle
    keeps are collected first: they hold their buffers until then)."""
    if nbytes <= 0:
        return
    memory, key = int(device.global_mem_size), device.int_ptr
    for attempt in range(2):
        with _lock:
            _settle()
            taken = _held.get(key, 0)
            fits = taken + nbytes <= memory
            if fits:
                _held[key] = taken + nbytes
        if fits:
            weakref.finalize(owner, _release, key, nbytes)
            return
        if attempt == 0:
            gc.collect()
    raise DeviceError(f"{what} needs {mib(nbytes)} of device memory, but this process's other "
                      f"requests and networks hold {mib(taken)} of the {mib(memory)} device "
                      f"'{device.name.strip()}' has; {advice}")


def reserve_for_request(device, plan, request) -> None:
    """Reserve what a request of `plan` allocates (CompiledPlan.device_bytes): its own buffers
    while it lives, and its plan's constants, once, while the plan lives."""
    own, shared = plan.device_bytes
    with _lock:
        first, plan.constants_reserved = not plan.constants_reserved, True
    if first:
        try:
            reserve(device, shared, plan, "the constants of the network's plan")
        except DeviceError:
            plan.constants_reserved = False
            raise
    reserve(device, own, request, "a request of the network (its buffers for these input "
                                  "shapes)")


def _release(key: int, nbytes: int) -> None:
    """An owner died: its bytes are free from the lock's next holder on (list.append is
    atomic; no lock taken here, see _released)."""
    _released.append((key, nbytes))


def mib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 20:.1f} MiB"
