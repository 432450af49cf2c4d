"""A build worker's entry (build_workers.py starts `python -m` this module): the worker's
OpenCL context is made through ctypes in a thread while the main thread imports pyopencl,
numpy and our modules, and pyopencl then adopts it.

Why: eight workers starting at once on the GPU machine's host spent 0.7-0.9 s each importing
and then 0.1-0.3 s listing the platforms and 0.65-0.8 s making a context (an H200), one after
the other; the first builds of a cold load wait for them. The driver's calls release the GIL
(ctypes), so the two go at once. Nothing here imports more than the standard library before
the thread starts.

The loader is pyopencl's own (its wheel bundles one, found without importing pyopencl), so that
the platforms and devices come in the order the parent's `device_position` counted them; the
device's name is checked against the parent's as open_engine_at checks it. Anything that goes
wrong here leaves the worker to open its device as before (open_engine_at).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import sys
import threading

CL_SUCCESS = 0
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
_MAX = 64


def loader_path() -> str | None:
    """The OpenCL ICD loader pyopencl links: the one its wheel bundles (pyopencl/.libs), else
    the system's. The bundled one finds the vendors through PYOPENCL_HOME, which pyopencl's
    import sets (a call into it without crashed, here): set here first, to the same folder,
    before any thread calls it (pyopencl's own setting then replaces it with the same value)."""
    try:
        spec = importlib.util.find_spec("pyopencl")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(glob.glob(os.path.join(folder, ".libs", "libOpenCL*.so*")))
        if found:
            os.environ["PYOPENCL_HOME"] = os.path.abspath(folder)
            return found[0]
    return ctypes.util.find_library("OpenCL")


class EarlyContext:
    """A context on the device at `position` (platform, device indices), made in a thread
    from now on. take(): (context, device) as C handles (ints), or None where it failed."""

    def __init__(self, position):
        self.position = tuple(int(i) for i in position)
        self._loader = loader_path()          # (in this thread: it may set the environment)
        self._result: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._open, name="cl-early-context",
                                        daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            self._result = _open_context(self._loader, *self.position)
        except Exception:   # noqa: BLE001 - the worker then opens its device as before
            self._result = None

    def take(self, timeout: float | None = None) -> tuple[int, int] | None:
        self._thread.join(timeout)
        return None if self._thread.is_alive() else self._result


def _open_context(path: str | None, platform_index: int,
                  device_index: int) -> tuple[int, int] | None:
    if path is None:
        return None
    cl = ctypes.CDLL(path)
    handle = ctypes.c_void_p
    count = ctypes.c_uint32()
    platforms = (handle * _MAX)()
    if cl.clGetPlatformIDs(ctypes.c_uint32(_MAX), platforms, ctypes.byref(count)) != \
            CL_SUCCESS or platform_index >= count.value:
        return None
    devices = (handle * _MAX)()
    if cl.clGetDeviceIDs(handle(platforms[platform_index]), ctypes.c_uint64(CL_DEVICE_TYPE_ALL),
                         ctypes.c_uint32(_MAX), devices, ctypes.byref(count)) != CL_SUCCESS \
            or device_index >= count.value:
        return None
    device = handle(devices[device_index])
    error = ctypes.c_int32()
    cl.clCreateContext.restype = handle
    context = cl.clCreateContext(None, ctypes.c_uint32(1), ctypes.byref(device), None, None,
                                 ctypes.byref(error))
    if error.value != CL_SUCCESS or not context:
        return None
    return int(context), int(device.value)


def main(argv: list[str]) -> int:
    import ast
    spec = argv[1]
    early = EarlyContext(ast.literal_eval(spec)[0])
    from .build_workers import serve
    return serve(spec, early)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
