"""OpenCL device selection and description, and the Engine: one device's context, queue and
program cache."""
from __future__ import annotations

import re

import pyopencl as cl

from ... import settings
from ...errors import DeviceError, NoSuchDeviceError
from .build_workers import start_early
from .cache import ProgramCache
from .kernel_objects import memoize_kernel_invokers
from .limits import is_pocl_platform


# NVIDIA's driver reads CUDA_CACHE_PATH (and CUDA_CACHE_DISABLE) once, when the process first
# lists the OpenCL platforms; a later change of the variable moves nothing. So the folder in
# force then is noted, and a package's machine code goes there (package/machine_code.py).
_driver_cache: list = []


def _note_driver_cache() -> None:
    if not _driver_cache:
        _driver_cache.append(settings.nvidia_cache_dir())


def driver_cache_folder():
    """The folder NVIDIA's driver in this process keeps the code it compiles in: the one
    CUDA_CACHE_PATH named when this process first listed the OpenCL platforms through us (or
    names now, where that has not happened yet); None where the driver's cache is off."""
    _note_driver_cache()
    return _driver_cache[0]


def list_devices() -> list[cl.Device]:
    """Every device of every platform (a platform that fails to list its devices is skipped)."""
    _note_driver_cache()
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


# OpenVINO's device names: a type, then an index per type ("GPU.0", "GPU.1", "CPU.0")
_INDEXED = re.compile(r"(GPU|CPU|ACCELERATOR|OTHER)\.(\d{1,6})", re.IGNORECASE)
# OpenVINO's virtual devices spread one model over several; we run on one device
_VIRTUAL_PREFIXES = ("MULTI:", "HETERO:", "BATCH:", "AUTO:")


def _index_type(dev) -> str:
    """The type a device is numbered under: its first of GPU, CPU, ACCELERATOR, else OTHER."""
    return _type_name(dev).split("/")[0]


def device_index_names(devices: list | None = None) -> list[str]:
    """'GPU.0', 'GPU.1', 'CPU.0', ... for `devices` (default: every device), numbered per type
    in the order OpenCL lists them, as OpenVINO names its devices."""
    devices = list_devices() if devices is None else devices
    seen: dict[str, int] = {}
    names = []
    for dev in devices:
        kind = _index_type(dev)
        names.append(f"{kind}.{seen.get(kind, 0)}")
        seen[kind] = seen.get(kind, 0) + 1
    return names


def _listing(devices: list) -> str:
    return "; ".join(f"{name} {_label(d)}"
                     for name, d in zip(device_index_names(devices), devices))


def select_device(selector: str | None = None) -> cl.Device:
    """None (and no CUSTOMLAYERS_DEVICE), or "AUTO": the best device, a GPU if any (most compute
    units), else a CPU. "CPU"/"GPU": the best of that type. "GPU.1": the second GPU, numbered per
    type in the order OpenCL lists them (as OpenVINO numbers its devices). Anything else: the
    first device whose device or platform name contains it (case-insensitive). DeviceError lists
    the devices with their index names."""
    devices = list_devices()
    if not devices:
        raise DeviceError("no OpenCL device found: install an OpenCL driver (PoCL runs on any "
                          "CPU: apt-get install pocl-opencl-icd)")
    if selector is None:
        selector = settings.default_device()
    if selector is None or not selector.strip() or selector.strip().upper() == "AUTO":
        return max(devices, key=_rank)
    wanted = selector.strip()
    if wanted.upper().startswith(_VIRTUAL_PREFIXES):
        # a wrong argument like a missing device: NoSuchDeviceError, exit 2 on the command line
        raise NoSuchDeviceError(f"device '{wanted}': a model runs on one OpenCL device here "
                                f"(no MULTI, HETERO, BATCH or AUTO lists); name one, e.g. "
                                f"{device_index_names(devices)[0]}; devices: "
                                f"{_listing(devices)}")
    indexed = _INDEXED.fullmatch(wanted)
    if indexed:
        names = device_index_names(devices)
        name = f"{indexed.group(1).upper()}.{int(indexed.group(2))}"
        if name not in names:
            raise NoSuchDeviceError(f"no OpenCL device '{wanted}': the devices are "
                                    f"{_listing(devices)}")
        return devices[names.index(name)]
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
        raise NoSuchDeviceError(f"no OpenCL device matches '{wanted}' (CPU, GPU, GPU.0, or part of a "
                          f"device or platform name); devices: {_listing(devices)}")
    return max(matches, key=_rank)


def device_position(device) -> tuple[int, int]:
    """(platform, device) indices of `device` in OpenCL's lists, which another process on this
    machine sees in the same order (a checker's child process opens the parent's device by
    them). DeviceError when it is in none of them."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    for p, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d, candidate in enumerate(devices):
            if candidate == device:
                return p, d
    raise DeviceError(f"device '{device.name.strip()}' is not among the OpenCL devices that "
                      f"another process can open")


def open_engine_at(position: tuple[int, int], name: str | None = None,
                   cache: ProgramCache | None = None) -> "Engine":
    """An Engine with a context of its own on the device at `position` (device_position's
    indices; (0, 0) in a process that sees one platform, such as Oclgrind's). `name`: the
    device's name where the indices were taken; a device of another name there means the lists
    differ. DeviceError when there is no such device or it is not that one."""
    platform, index = position
    try:
        device = cl.get_platforms()[platform].get_devices()[index]
    except IndexError:
        raise DeviceError(f"there is no OpenCL device {platform}.{index} (platform, device) "
                          f"here") from None
    except cl.Error as e:
        raise DeviceError(f"OpenCL device {platform}.{index} cannot be opened: "
                          f"{_first_line(e)}") from None
    if name is not None and device.name != name:
        raise DeviceError(f"device {platform}.{index} is '{device.name.strip()}' here, "
                          f"'{name.strip()}' in the parent")
    try:
        return _engine_on(cl.Context([device]), device, cache)
    except cl.Error as e:
        raise DeviceError(f"device {_label(device)}: no context: {_first_line(e)}") from None


def adopt_context(context_handle: int, device_handle: int, name: str | None = None,
                  cache: ProgramCache | None = None) -> "Engine | None":
    """An Engine on a context made outside pyopencl (build_workers.EarlyContext, through the
    same loader): pyopencl takes over its reference. None (the context released) where the
    device is not `name`, as open_engine_at would refuse it, or the handles are not usable."""
    try:
        context = cl.Context.from_int_ptr(context_handle, retain=False)
        device = cl.Device.from_int_ptr(device_handle)
        if (name is not None and device.name != name) or device not in context.devices:
            return None
        return _engine_on(context, device, cache)
    except cl.Error:
        return None


def _engine_on(context, device, cache) -> "Engine":
    """An Engine on a context of our own child process (a build worker, a checker, a
    machine-code capture): its parent's cache is its own, and it starts no build workers (no
    start_early)."""
    engine = Engine.__new__(Engine)
    engine._setup(device, context, None, cache)
    return engine


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else repr(e)


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
    """One device: a context, a queue and a program cache.

    `Engine(device)` makes its own context; each request of a network then makes its own
    in-order queue (several requests overlap on the device). `Engine.from_context` runs on the
    user's context, `Engine.from_queue` also enqueues every kernel on the user's queue (in-order
    or out-of-order: with an out-of-order queue, order comes from events). `shared_queue` is
    that user's queue, or None."""

    def __init__(self, device=None, cache=None):
        if device is None or isinstance(device, str):
            device = select_device(device)
        cache = cache if cache is not None else ProgramCache()
        # build workers, on a first load on this machine, started before this process's own
        # context, whose creation their start then overlaps too (they inherit PoCL's setting,
        # made first)
        if is_pocl_platform(device):
            settings.prefer_pocl_generic_work_groups()
        start_early(device, cache)
        self._setup(device, cl.Context([device]), None, cache)

    def _setup(self, device, context, shared_queue, cache) -> None:
        _note_driver_cache()       # a user's context: the platforms were listed by now
        memoize_kernel_invokers()  # a Kernel per launch: 160 -> 12 µs each (kernel_objects.py)
        if is_pocl_platform(device):
            settings.prefer_pocl_generic_work_groups()
        self.device = device
        self.context = context
        self.shared_queue = shared_queue
        self.queue = shared_queue if shared_queue is not None else cl.CommandQueue(
            context, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.cache = cache if cache is not None else ProgramCache()

    @classmethod
    def from_context(cls, context, device=None, cache=None) -> "Engine":
        """An engine on the user's pyopencl Context. device: one of the context's devices
        (default: the best of them, a GPU first). DeviceError for a device outside it."""
        if not isinstance(context, cl.Context):
            raise DeviceError(f"Engine.from_context takes a pyopencl.Context, not "
                              f"{type(context).__name__}")
        devices = list(context.devices)
        if device is None:
            device = max(devices, key=_rank)
        elif not isinstance(device, cl.Device):
            raise DeviceError(f"Engine.from_context: device must be a pyopencl.Device of the "
                              f"context, not {type(device).__name__}")
        elif device not in devices:
            raise DeviceError(f"Engine.from_context: device {_label(device)} is not a device "
                              f"of the context; its devices: "
                              f"{'; '.join(_label(d) for d in devices)}")
        engine = cls.__new__(cls)
        engine._setup(device, context, None, cache)
        start_early(device, engine.cache)    # build workers, on a first load on this machine
        return engine

    @classmethod
    def from_queue(cls, queue, cache=None) -> "Engine":
        """An engine that enqueues every kernel, copy and marker of its networks on the user's
        pyopencl CommandQueue (its context and device). An out-of-order queue is ordered by
        events."""
        if not isinstance(queue, cl.CommandQueue):
            raise DeviceError(f"Engine.from_queue takes a pyopencl.CommandQueue, not "
                              f"{type(queue).__name__}")
        engine = cls.__new__(cls)
        engine._setup(queue.device, queue.context, queue, cache)
        start_early(queue.device, engine.cache)    # as from_context
        return engine

    @property
    def out_of_order(self) -> bool:
        """Whether kernels go to an out-of-order queue (the user's), so events order them."""
        return self.shared_queue is not None and bool(
            self.shared_queue.properties &
            cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)

    @property
    def unified_memory(self) -> bool:
        """Host and device memory are the same (a CPU device such as PoCL): a host array can be
        a kernel's buffer where it lies, and a mapped buffer is the device's memory. Integrated
        GPUs that share memory are not counted: using a buffer while it is mapped, or a host
        pointer without their alignment, is not zero-copy (or not defined) there."""
        return bool(self.device.type & cl.device_type.CPU)

    def build(self, source: str, options: str = "", *, line_map=(), label: str = ""):
        """Build `source` for this engine's device through its cache."""
        return self.cache.build(self.context, self.device, source, options,
                                line_map=line_map, label=label)

    def __repr__(self) -> str:
        shared = ", the user's queue" if self.shared_queue is not None else ""
        return f"Engine({_label(self.device)}{shared})"


def is_gpu(dev) -> bool:
    return bool(dev.type & cl.device_type.GPU)


def nvidia_pci_address(dev) -> str | None:
    """The PCI address (domain:bus:slot, hex) of an NVIDIA GPU (their extension's queries),
    None on any other device: it tells two alike GPUs apart. The bus alone does not: a
    virtual machine may put each GPU on bus 0 of its own domain."""
    def query(key):
        try:
            return int(dev.get_info(getattr(cl.device_info, f"PCI_{key}_ID_NV")))
        except (cl.Error, AttributeError, ValueError):
            return None
    bus = query("BUS")
    if bus is None:
        return None
    domain, slot = query("DOMAIN"), query("SLOT")
    if domain is None or slot is None:      # an older driver: the bus alone
        return f"{bus:02x}"
    return f"{domain:04x}:{bus:02x}:{slot:02x}"
