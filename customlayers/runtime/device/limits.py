"""What a device can run: work-group limits, uniform work-groups, fp64, and the traits an
implementation may choose its kernels by (jit.launch.DeviceTraits). Checks raise BindingError
located at the descriptor's <WorkSizes> (code CL083), so `validate --compile` reports them where
the user fixes them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import pyopencl as cl

from ...errors import BindingError
from ... import settings
from ...settings import cpu_vector_width

if TYPE_CHECKING:
    # (not imported at run time: a build worker process imports this module, and jit's and
    # config's modules were a third of its imports, on the critical path of a cold load)
    from ...config.simplegpu.spec import LayerSpec
    from ...jit.launch import DeviceTraits

LOCAL_SIZE_CODE = "CL083"


def device_traits(device: cl.Device) -> DeviceTraits:
    from ...jit.launch import DeviceTraits
    kind = "CPU" if device.type & cl.device_type.CPU else \
        "GPU" if device.type & cl.device_type.GPU else "ACCELERATOR"
    width = int(device.preferred_vector_width_float) or int(device.native_vector_width_float)
    forced = cpu_vector_width()         # a ConfigError naming the variable for a bad value
    if kind == "CPU" and forced is not None:    # the kernels of another machine (tests, CI)
        width = forced
    return DeviceTraits(kind, int(device.max_compute_units), int(device.max_work_group_size),
                        max(width, 1), local_mem_size=int(device.local_mem_size),
                        global_cache_bytes=int(device.global_mem_cache_size),
                        async_copy=has_async_copy(device))


def has_async_copy(device) -> bool:
    """Whether kernels may copy global to __local memory with PTX cp.async: NVIDIA's own
    platform (its compiler takes inline PTX) on compute capability 8.0 or later (the query of
    cl_nv_device_attribute_query)."""
    if not is_nvidia_platform(device):
        return False
    try:
        return int(device.compute_capability_major_nv) >= 8
    except Exception:                      # noqa: BLE001 - a driver without the query
        return False


def has_fp64(device) -> bool:
    """Whether the device computes in double (OpenCL 1.2+: a double_fp_config; the extension)."""
    try:
        if int(device.double_fp_config):
            return True
    except Exception:                      # noqa: BLE001 - drivers without the query
        pass
    return "cl_khr_fp64" in device.extensions.split()


def has_fp16(device) -> bool:
    """Whether kernels may compute in half (cl_khr_fp16; without it half is a storage type)."""
    return "cl_khr_fp16" in device.extensions.split()


def is_nvidia_platform(device) -> bool:
    """Whether `device` is of NVIDIA's own OpenCL platform ("NVIDIA CUDA", vendor "NVIDIA
    Corporation"): its binaries are PTX, compiled to machine code through its code cache
    folder, and its compiler builds one program at a time per process. PoCL's CUDA device is
    an NVIDIA GPU too, but of PoCL's platform."""
    return "NVIDIA" in device.platform.vendor


def is_pocl_platform(device) -> bool:
    """Whether `device` is of PoCL's platform, which calls itself "Portable Computing Language"
    (its CPU device, or any other it drives)."""
    return "Portable Computing Language" in device.platform.name


def binary_is_wasted(device) -> bool:
    """Whether asking `device`'s driver for a program's binary compiles every kernel of it
    once more for nothing, while the driver's own cache keeps the program (keyed by source and
    options, so that building the same text again in any process costs a lookup): a PoCL that
    specializes its work-groups (POCL_WORK_GROUP_SPECIALIZATION=1) with its kernel cache on
    (POCL_KERNEL_CACHE). The binary holds a work-group function for any local size, which
    such a PoCL never runs: it compiles another per size at the first launch (3-5 s of a
    convolution program's 6 s cold cost on the 2-core machine, stop 27). Where PoCL does not
    specialize (what an Engine sets where the user has not: settings.py) the launches run the
    binary's function, and the program cache keeps binaries (cache.py)."""
    return is_pocl_platform(device) and settings.pocl_kernel_cache_on() and \
        settings.pocl_specializes_work_groups()


# the work-group sizes steady_local_size picks from, largest first, and their largest product
_STEADY_STEPS = (64, 32, 16, 8, 4, 2)
_STEADY_ITEMS = 64


def steady_local_size(device, global_size) -> tuple[int, ...] | None:
    """A local size for a launch that gives none, on PoCL, from a few sizes per kernel instead of
    the driver's choice per shape: a PoCL that specializes its work-groups (PoCL's default; an
    Engine turns it off where the user has not set it) compiles a kernel for each size it runs,
    and it picked a new size for each of DenseNet-121's 62 BatchNorm+ReLU launches and compiled
    the kernel 62 times (4.7 s of a 12 s first run on the 2-core machine). Kept for that mode,
    and because the sizes it picks vectorize dimension 0 either way. Dimension
    0, which PoCL vectorizes, takes all of itself up to 16 items, or the largest of
    _STEADY_STEPS down to 8 that divides it; the others the largest that divides them within
    _STEADY_ITEMS in all. None (the driver chooses) elsewhere, or where dimension 0 would get
    fewer than 8 items of a larger extent (too narrow to vectorize)."""
    if not is_pocl_platform(device) or not global_size or \
            device.max_work_group_size < _STEADY_ITEMS:
        return None
    first = int(global_size[0])
    if first <= 16:
        local = [first]
    else:
        step = next((s for s in _STEADY_STEPS if s >= 8 and first % s == 0), None)
        if step is None:
            return None
        local = [step]
    budget = _STEADY_ITEMS // local[0]
    for extent in global_size[1:]:
        step = next((s for s in _STEADY_STEPS + (1,) if s <= budget and int(extent) % s == 0),
                    1)
        local.append(step)
        budget //= step
    return tuple(local)


def supports_non_uniform_groups(device: cl.Device) -> bool:
    """OpenCL 2.x always allows a last, smaller work-group; 3.0 makes it optional and says so
    in a device query; 1.x never allows it."""
    try:
        major = int(device.version.split()[1].split(".")[0])
    except (IndexError, ValueError):
        return False
    if major < 2:
        return False
    try:
        return bool(device.non_uniform_work_group_support)
    except (AttributeError, cl.Error):
        return major == 2


def _local_size_error(spec: LayerSpec, message: str) -> BindingError:
    return BindingError(message).at(spec.work_sizes.location, LOCAL_SIZE_CODE, spec.name)


def check_local_size(spec: LayerSpec, global_size: Sequence[int],
                     local_size: Sequence[int] | None, device: cl.Device) -> None:
    """BindingError when the device cannot run this local size, naming layer, formula, values."""
    if not local_size:
        return
    formula = ",".join(spec.work_sizes.local or ())
    where = (f"layer type '{spec.name}' ({spec.work_sizes.location}): local=\"{formula}\" "
             f"gives {list(local_size)} for global {list(global_size)}")
    device_name = device.name.strip()
    total = 1
    for v in local_size:
        total *= v
    if total > device.max_work_group_size:
        raise _local_size_error(spec, f"{where}: {total} work items per group, but device "
                                      f"'{device_name}' allows at most "
                                      f"{device.max_work_group_size}")
    limits = device.max_work_item_sizes
    for i, (v, lim) in enumerate(zip(local_size, limits)):
        if v > lim:
            raise _local_size_error(spec, f"{where}: local[{i}]={v} is over device "
                                          f"'{device_name}''s limit {lim} for dimension {i}")
    if not supports_non_uniform_groups(device):
        for i, (g, v) in enumerate(zip(global_size, local_size)):
            if g % v:
                rounded = _rounded_up(_global_formula(spec, i, g), v)
                raise _local_size_error(
                    spec, f"{where}: local[{i}]={v} does not divide global[{i}]={g}, and device "
                          f"'{device_name}' ({device.version.strip()}) needs uniform "
                          f"work-groups; round the global size up (e.g. {rounded}) and guard "
                          "the extra work items in the kernel")


def _global_formula(spec: LayerSpec, i: int, value: int) -> str:
    """The text of global entry i: as written, or what the default global stands for."""
    written = spec.work_sizes.global_
    if written is not None and i < len(written):
        return written[i].strip()
    if written is None and spec.work_sizes.dim == ("output", 0):
        return "B*F*Y*X"      # the default: output 0's element count, and dim is output 0
    return str(value)


def _rounded_up(formula: str, v: int) -> str:
    term = formula if formula.isalnum() else f"({formula})"
    return f"({term}+{v - 1})/{v}*{v}"


def check_kernel_work_group(spec: LayerSpec, local_size: Sequence[int] | None,
                            kernel: cl.Kernel, device: cl.Device) -> None:
    """The compiled kernel may allow fewer work items per group than the device (registers,
    local memory): check that too once it is built."""
    if not local_size:
        return
    limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
    total = 1
    for v in local_size:
        total *= v
    if total > limit:
        formula = ",".join(spec.work_sizes.local or ())
        raise _local_size_error(spec, f"layer type '{spec.name}' ({spec.work_sizes.location}): "
                                      f"local=\"{formula}\" gives {total} work items per group, "
                                      f"but kernel '{spec.entry}' allows at most {limit} on "
                                      f"device '{device.name.strip()}'")
