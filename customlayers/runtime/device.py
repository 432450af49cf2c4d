"""OpenCL device selection and description, and the Engine: one device's context, queue and
program cache."""
from __future__ import annotations

import pyopencl as cl

from .. import settings
from ..errors import DeviceError
from .cache import ProgramCache


def list_devices() -> list[cl.Device]:
    """Every device of every platform (a platform that fails to list its devices is skipped)."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    devices: list[cl.Device] = []
    for platform in platforms:
        try:
            devices += platform.get_devices()
        except cl.Error:
            continue
    return devices


def _type_name(dev) -> str:
    kinds = [name for name, flag in (("GPU", cl.device_type.GPU), ("CPU", cl.device_type.CPU),
                                     ("ACCELERATOR", cl.device_type.ACCELERATOR))
             if dev.type & flag]
    return "/".join(kinds) or "OTHER"


def _rank(dev) -> tuple:
    """Bigger is better: a GPU first, then the most compute units."""
    return (bool(dev.type & cl.device_type.GPU), dev.max_compute_units)


def _label(dev) -> str:
    return f"'{dev.name.strip()}' ({_type_name(dev)}, {dev.platform.name.strip()})"


def select_device(selector: str | None = None) -> cl.Device:
    """None (and no CUSTOMLAYERS_DEVICE): the best device, a GPU if any (most compute units),
    else a CPU. "CPU"/"GPU": the best of that type. Anything else: the first device whose
    device or platform name contains it (case-insensitive). DeviceError lists the devices."""
    devices = list_devices()
    if not devices:
        raise DeviceError("no OpenCL device found: install an OpenCL driver (PoCL runs on any "
                          "CPU: apt-get install pocl-opencl-icd)")
    if selector is None:
        selector = settings.default_device()
    if selector is None or not selector.strip():
        return max(devices, key=_rank)
    wanted = selector.strip()
    by_type = {"GPU": cl.device_type.GPU, "CPU": cl.device_type.CPU,
               "ACCELERATOR": cl.device_type.ACCELERATOR}
    if wanted.upper() in by_type:
        matches = [d for d in devices if d.type & by_type[wanted.upper()]]
    else:
        low = wanted.lower()
        # the platform's vendor and version too: PoCL calls its platform
        # "Portable Computing Language" and says "PoCL" only there
        matches = [d for d in devices
                   if any(low in text.lower() for text in
                          (d.name, d.platform.name, d.platform.vendor, d.platform.version))]
    if not matches:
        known = "; ".join(_label(d) for d in devices)
        raise DeviceError(f"no OpenCL device matches '{wanted}' (CPU, GPU, or part of a device "
                          f"or platform name); devices: {known}")
    return max(matches, key=_rank)


def describe_device(dev) -> dict:
    """The facts a user needs to pick a device and read a benchmark."""
    extensions = dev.extensions.split()
    return {
        "name": dev.name.strip(),
        "platform": dev.platform.name.strip(),
        "type": _type_name(dev),
        "opencl_version": dev.version.strip(),
        "driver": dev.driver_version.strip(),
        "fp16": "cl_khr_fp16" in extensions,
        "fp64": "cl_khr_fp64" in extensions,
        "max_work_group_size": int(dev.max_work_group_size),
        "compute_units": int(dev.max_compute_units),
        "global_mem_mib": int(dev.global_mem_size) // (1024 * 1024),
        "max_alloc_mib": int(dev.max_mem_alloc_size) // (1024 * 1024),
    }


class Engine:
    """One device: a context, an in-order queue with profiling, and a program cache."""

    def __init__(self, device=None, cache=None):
        if device is None or isinstance(device, str):
            device = select_device(device)
        self.device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device,
                                     properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.cache = cache if cache is not None else ProgramCache()

    def build(self, source: str, options: str = "", *, line_map=(), label: str = ""):
        """Build `source` for this engine's device through its cache."""
        return self.cache.build(self.context, self.device, source, options,
                                line_map=line_map, label=label)

    def __repr__(self) -> str:
        return f"Engine({_label(self.device)})"
