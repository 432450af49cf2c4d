"""The child process of --sanitize (sanitize.py): runs one kernel launch, described by a job file
that the parent wrote, on the only OpenCL platform this process sees (Oclgrind): the device is
opened by the device room, the launch run by the execute room (execute/one_launch.py). Oclgrind
writes its reports to stderr; the last line of stdout is a JSON summary."""
from __future__ import annotations

import json
import pickle
import sys


def main(job_path: str) -> int:
    import tempfile

    import numpy as np

    from ...errors import CustomLayersError
    from ..device.cache import ProgramCache
    from ..device.device import open_engine_at
    from ..execute.one_launch import HostBytes, LocalBytes, run_one_launch
    with open(job_path, "rb") as f:
        job = pickle.load(f)   # written by our own parent process, never by a user
    try:
        with tempfile.TemporaryDirectory(prefix="customlayers-oclgrind-") as tmp:
            # nothing kept: a simulated program is built once, in this process
            engine = open_engine_at((0, 0), cache=ProgramCache(tmp, enabled=False,
                                                               verbose=False))
            program = engine.build(job["source"], job["options"])
            args = [HostBytes(np.frombuffer(value, np.uint8).copy()) if kind == "buffer" else
                    LocalBytes(value) if kind == "local" else value
                    for kind, value in job["args"]]
            # Oclgrind reports what the kernel did while it ran: nothing to read back
            run_one_launch(engine, program, job["entry"], job["global"], job["local"], args,
                           read_back=False)
    except CustomLayersError as e:
        print(json.dumps({"error": str(e).strip().splitlines()[0]}))
        return 0
    print(json.dumps({"device": engine.device.name.strip(), "ok": True}))
    return 0


if __name__ == "__main__":
    from customlayers.runtime.checks.checked_child import end_with_parent
    end_with_parent()
    sys.exit(main(sys.argv[1]))
