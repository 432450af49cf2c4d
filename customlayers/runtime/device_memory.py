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
"""
from __future__ import annotations

from typing import Sequence

from ..errors import DeviceError

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


def mib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 20:.1f} MiB"
