"""A package's programs: the binaries of a network's built programs (clGetProgramInfo
CL_PROGRAM_BINARIES: PTX on NVIDIA, PoCL's own on PoCL) keyed by a hash of (source, options),
the device they were built for, and loading them back into the driver.

A binary reaches the driver only from a part whose size and sha256 the container checked
(container.py): a driver may crash the process on a truncated binary instead of failing."""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

from ... import __version__
from ...errors import PackageError
from ..device.build import load_binary, program_binary
from ..device.parallel_build import MAX_THREADS, build_programs

# the fields of the device a package's binaries are bound to (the others are for reading)
BINDING = (("name", "device"), ("driver", "driver"), ("platform", "platform"))


def program_key(source: str, options: str) -> str:
    """sha256 over the length-prefixed source and options: the name of a program's binary."""
    h = hashlib.sha256()
    for part in (source, options):
        data = part.encode("utf-8", "surrogateescape")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def device_description(device) -> dict:
    """What the manifest records of the device the binaries were built for."""
    return {"name": device.name.strip(), "vendor": device.vendor.strip(),
            "platform": device.platform.name.strip(),
            "platform_version": device.platform.version.strip(),
            "opencl_version": device.version.strip(), "driver": device.driver_version.strip()}


def differences(manifest: dict, device) -> list[str]:
    """What differs between the device and version a package was built for and this one:
    ["device 'X' (this one: 'Y')", ...]; [] when its binaries can be used here."""
    built = manifest.get("device") if isinstance(manifest.get("device"), dict) else {}
    here = device_description(device)
    found = [f"{what} '{built.get(key)}' (this one: '{here[key]}')"
             for key, what in BINDING if built.get(key) != here[key]]
    if manifest.get("customlayers_version") != __version__:
        found.append(f"customlayers {manifest.get('customlayers_version')} (this one: "
                     f"{__version__})")
    return found


def binaries_of(device, built: dict) -> dict[str, bytes]:
    """{program key: its binary for `device`} of `built`: {program key: cl.Program}."""
    binaries = {}
    for key, program in built.items():
        binary = program_binary(program, device)
        if not binary:
            raise PackageError(f"the driver of {device.name.strip()} gives no binary of a "
                               f"program: it cannot be packaged (compile with --keep-sources "
                               f"and load it from its sources)")
        binaries[key] = binary
    return binaries


def load_binaries(engine, wanted: dict[str, tuple[bytes, str]]) -> dict:
    """{program key: cl.Program} from {program key: (binary, options)}, loaded in parallel
    (the driver's load may release the GIL); PackageError naming the program the driver
    refuses."""
    def load(key):
        binary, options = wanted[key]
        try:
            return load_binary(engine.context, engine.device, binary, options)
        except Exception as e:     # noqa: BLE001 - the driver's refusal, in its own words
            raise PackageError(f"the driver refuses the package's program {key[:16]} "
                               f"({type(e).__name__}: {e}); compile the package again for "
                               f"this device", f"program {key[:16]}") from None

    keys = list(wanted)
    threads = min(MAX_THREADS, os.cpu_count() or 1, len(keys))
    if threads <= 1:
        return {key: load(key) for key in keys}
    with ThreadPoolExecutor(threads, thread_name_prefix="cl-load") as pool:
        return dict(zip(keys, pool.map(load, keys)))


def build_from_sources(engine, sources: dict[str, tuple[str, str, str]]) -> dict:
    """{program key: cl.Program} built from {program key: (source, options, label)} through
    the engine's program cache (another device or driver: the package kept its sources)."""
    built = build_programs(engine, ((s, o, (), label) for s, o, label in sources.values()))
    programs = {}
    for key, (source, options, _) in sources.items():
        program = built[(source, options)]
        if isinstance(program, BaseException):
            raise program
        programs[key] = program
    return programs
