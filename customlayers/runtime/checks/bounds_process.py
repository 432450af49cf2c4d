"""--check-bounds in a child process: a kernel that crashes becomes an error naming its layer.

Guard zones (bounds.py) catch writes that land near a buffer; a kernel whose indices go far
astray (the ReorgYolo example with stride=-1) faults in the driver and takes the process with
it, the user's included, before any report. So each guarded launch runs in a child process
(bounds_worker.py), as --sanitize runs Oclgrind in one: the child opens the same device, builds
the same program (a program-cache hit when the parent built it with the cache on), runs
bounds.run_guarded and sends back the outputs and problems. A child killed by a signal, or past
the check's time limit (checked_child.py), is a BoundsProblem of the layer's kernel; the parent
is never touched.

`run_guarded_in_child` takes run_guarded's arguments, so a caller switches by name only.
"""
from __future__ import annotations

import pickle
import signal
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from ... import settings
from ...errors import DeviceError, ExecutionError
from ...jit.launch import KernelLaunch
from ...jit.tensor import TensorDesc
from ..device.device import device_position
from .bounds import BoundsProblem
from .checked_child import run_checked

def run_guarded_in_child(engine, program, launch: KernelLaunch, layer: str,
                         inputs: Sequence[np.ndarray], input_descs: Sequence[TensorDesc],
                         output_descs: Sequence[TensorDesc],
                         unwritten: Sequence[bool] | None = None
                         ) -> tuple[list[np.ndarray], list[BoundsProblem]]:
    """bounds.run_guarded, run in a child process (`program` is rebuilt there from the
    launch's source and options)."""
    del program       # a built program cannot cross processes; the child builds its own
    try:
        position = device_position(engine.device)   # the child opens the device by it
    except DeviceError as e:
        raise DeviceError(f"--check-bounds: {e}") from None
    job = {"device": position, "device_name": engine.device.name,
           "cache_dir": str(engine.cache.directory), "cache_enabled": engine.cache.enabled,
           "launch": launch, "layer": layer, "inputs": [np.ascontiguousarray(a) for a in inputs],
           "input_descs": list(input_descs), "output_descs": list(output_descs),
           "unwritten": None if unwritten is None else list(unwritten)}
    with tempfile.TemporaryDirectory(prefix="customlayers-bounds-") as tmp:
        job_path, result_path = Path(tmp) / "job.pickle", Path(tmp) / "result.pickle"
        job_path.write_bytes(pickle.dumps(job))
        done = run_checked([sys.executable, "-m", "customlayers.runtime.checks.bounds_worker",
                            str(job_path), str(result_path)], settings.child_environment(),
                           f"layer '{layer}': kernel '{launch.entry}' under --check-bounds")
        if done is None:
            return [], [BoundsProblem(layer, f"kernel '{launch.entry}'",
                                      f"did not finish within {settings.check_timeout_s():g} s "
                                      f"under --check-bounds (a loop that never ends? "
                                      f"CUSTOMLAYERS_CHECK_TIMEOUT sets the limit)")]
        if done.returncode < 0:
            return [], [_crash(layer, launch, -done.returncode)]
        if done.returncode != 0 or not result_path.exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ExecutionError(f"layer '{layer}': the --check-bounds run failed (exit "
                                 f"{done.returncode}): {tail}")
        # written by our own child process, never by a user
        result = pickle.loads(result_path.read_bytes())
    if "error" in result:
        raise ExecutionError(f"layer '{layer}': --check-bounds: {result['error']}")
    if "fault" in result:
        return [], [_far_access(layer, launch, f"failed on the device ({result['fault']})")]
    return result["outputs"], result["problems"]


def _crash(layer: str, launch: KernelLaunch, signum: int) -> BoundsProblem:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return _far_access(layer, launch, f"crashed the process that ran it ({name})")


def _far_access(layer: str, launch: KernelLaunch, what: str) -> BoundsProblem:
    """A kernel that crashed its process (a CPU device) or failed on the device (a GPU's
    illegal address): an access far from its tensors, which the guard zones cannot show."""
    return BoundsProblem(layer, f"kernel '{launch.entry}'",
                         f"{what}: it reads or writes far outside its tensors, where the guard "
                         f"zones do not reach; run with --sanitize to see the access and its "
                         f"line in your .cl")


def check_kernel_bounds(bound, *arrays: np.ndarray, **data: np.ndarray):
    """A BoundKernel (execute/kernel.py) run once like its __call__, with guard zones around every
    buffer and outputs pre-filled with a NaN pattern (bounds.py), in a child process (a crash is a
    problem found): (the outputs as a list, the problems found)."""
    launch, packed = bound.prepared_call(*arrays, **data)
    return run_guarded_in_child(bound.engine, bound.program, launch, bound.spec.name, packed,
                                bound.inputs, bound.outputs)
