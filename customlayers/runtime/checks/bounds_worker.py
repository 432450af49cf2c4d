"""The child process of --check-bounds (bounds_process.py): opens the parent's device, builds
the launch's program through the program cache, runs it with guard zones (bounds.run_guarded)
and writes the outputs and problems to the result file. A kernel that crashes kills only this
process; the parent reports the signal. One that the device stops with an error (a GPU's
illegal address) is reported as a fault."""
from __future__ import annotations

import pickle
import sys


def main(job_path: str, result_path: str) -> int:
    from ...errors import CustomLayersError
    from .bounds import run_guarded
    from ..device.cache import ProgramCache
    from ..device.device import open_engine_at
    from ..execute.one_launch import LaunchFailed
    with open(job_path, "rb") as f:
        job = pickle.load(f)   # written by our own parent process, never by a user
    try:
        engine = open_engine_at(tuple(job["device"]), job["device_name"], cache=ProgramCache(
            job["cache_dir"], enabled=job["cache_enabled"]))
        launch = job["launch"]
        program = engine.build(launch.source, launch.options, line_map=launch.line_map,
                               label=launch.label or job["layer"])
        try:
            outputs, problems = run_guarded(engine, program, launch, job["layer"],
                                            job["inputs"], job["input_descs"],
                                            job["output_descs"], job.get("unwritten"))
            result = {"outputs": outputs, "problems": problems}
        except LaunchFailed as e:
            # built, then failed running: a GPU reports a wild access as an error of the
            # launch or of the wait after it (NVIDIA: an illegal address), where a CPU faults
            result = {"fault": _first_line(e)}
    except CustomLayersError as e:
        result = {"error": _first_line(e)}
    with open(result_path, "wb") as f:
        pickle.dump(result, f)
    return 0


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else repr(e)


if __name__ == "__main__":
    from customlayers.runtime.checks.checked_child import end_with_parent
    end_with_parent()
    sys.exit(main(sys.argv[1], sys.argv[2]))
