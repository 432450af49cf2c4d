"""Which OpenCL device a worker process runs on, and how many threads PoCL may use there.

Ray gives each actor a share of its node: GPU ids (`num_gpus`) and CPUs (`num_cpus`). For
NVIDIA GPUs it sets CUDA_VISIBLE_DEVICES in the actor's process before the actor's constructor
runs. NVIDIA's OpenCL driver sits on its CUDA driver and is expected to list only those
devices, but we do not rely on that: when OpenCL still lists more GPUs than Ray assigned, the
variable was not honoured (another driver, or RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES) and
the GPU is picked by Ray's id instead (CUDA numbers GPUs in PCI bus order when they are alike,
as OpenCL lists them).

On a CPU-only node every actor's PoCL would start a thread per core; two actors on two cores
would then run four threads. PoCL reads POCL_MAX_PTHREAD_COUNT when it first initializes in a
process, so the actor sets it to its CPU share before anything touches OpenCL (as Ray itself
sets OMP_NUM_THREADS to an actor's num_cpus).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import MutableMapping

from ..errors import DeviceError
from ..runtime.device.device import (describe_device, is_gpu, list_devices, nvidia_pci_address,
                                     select_device)

POCL_THREADS = "POCL_MAX_PTHREAD_COUNT"

# selectors that leave the choice of GPU to us, and so to Ray's assignment
_FREE_CHOICE = ("", "GPU", "AUTO")


@dataclass(frozen=True)
class RayShare:
    """What Ray assigned to this process: GPU ids and CPUs (none outside a Ray worker)."""
    gpu_ids: tuple = field(default=())
    cpus: float | None = None


def ray_share() -> RayShare:
    """The current Ray worker's GPU ids and CPUs; empty in a plain process or in a driver."""
    try:
        import ray
    except ImportError:
        return RayShare()
    if not ray.is_initialized():
        return RayShare()
    try:
        resources = ray.get_runtime_context().get_assigned_resources()
    except AssertionError:      # Ray's answer in a driver, which holds no share
        return RayShare()
    return RayShare(tuple(ray.get_gpu_ids()), resources.get("CPU"))


def threads_for(cpus: float | None) -> int | None:
    """PoCL threads for a CPU share: its whole cores, at least one (None: no share known)."""
    if cpus is None or cpus <= 0:
        return None
    return max(1, math.floor(cpus))


def limit_pocl_threads(threads: int, environ: MutableMapping[str, str] | None = None) -> bool:
    """Cap PoCL's threads in this process, unless the user set the cap already (their choice
    wins, e.g. through Ray's runtime_env). Takes effect only before PoCL initializes here."""
    environ = os.environ if environ is None else environ
    if POCL_THREADS in environ:
        return False
    environ[POCL_THREADS] = str(int(threads))
    return True


def _gpus() -> list:
    """The GPUs Ray's ids refer to: NVIDIA's when there are any (Ray counts CUDA devices),
    else every GPU."""
    gpus = [d for d in list_devices() if is_gpu(d)]
    nvidia = [d for d in gpus if "nvidia" in d.platform.name.lower()]
    return nvidia or gpus


def choose_device(selector: str | None, gpu_ids=()):
    """The device for a worker: with GPUs assigned by Ray and a selector that leaves the
    choice open (None, "GPU", "AUTO"), the assigned GPU; otherwise select_device(selector)."""
    free = selector is None or selector.strip().upper() in _FREE_CHOICE
    if not gpu_ids or not free:
        return select_device(selector)
    gpus = _gpus()
    if not gpus:
        raise DeviceError(f"Ray assigned GPU {', '.join(map(str, gpu_ids))} to this worker, "
                          f"but OpenCL lists no GPU here: install the GPU's OpenCL driver "
                          f"(NVIDIA: its ICD, /etc/OpenCL/vendors/nvidia.icd), or ask for "
                          f"device='CPU' and num_gpus=0")
    if len(gpus) <= len(gpu_ids):
        return gpus[0]          # the driver lists only the assigned GPUs: ours is the first
    # the driver lists every GPU of the node: take Ray's (an index; Ray may also hand out
    # GPUs named by UUID, which OpenCL does not show)
    if not str(gpu_ids[0]).isdigit():
        raise DeviceError(f"Ray assigned GPU '{gpu_ids[0]}' to this worker and OpenCL lists "
                          f"{len(gpus)} GPUs, so the driver ignored CUDA_VISIBLE_DEVICES; name "
                          f"the device (device='GPU.N') or give Ray GPU indices")
    index = int(gpu_ids[0])
    if index >= len(gpus):
        raise DeviceError(f"Ray assigned GPU {index} to this worker, but OpenCL lists "
                          f"{len(gpus)} GPU(s): {', '.join(d.name.strip() for d in gpus)}")
    return gpus[index]


def device_report(device) -> dict:
    """describe_device plus the PCI address of an NVIDIA GPU: tells apart two alike GPUs, so
    a run on two can show that its two actors did not share one."""
    report = describe_device(device)
    address = nvidia_pci_address(device)
    if address is not None:     # an NVIDIA device (the query is their extension)
        report["pci"] = address
    return report
