"""The child process of --sanitize (sanitize.py): runs one kernel launch, described by a job file
that the parent wrote, on the only OpenCL platform this process sees (Oclgrind). Oclgrind writes
its reports to stderr; the last line of stdout is a JSON summary."""
from __future__ import annotations

import json
import pickle
import sys


def main(job_path: str) -> int:
    import numpy as np
    import pyopencl as cl
    with open(job_path, "rb") as f:
        job = pickle.load(f)   # written by our own parent process, never by a user
    try:
        device = cl.get_platforms()[0].get_devices()[0]
        context = cl.Context([device])
        queue = cl.CommandQueue(context)
        program = cl.Program(context, job["source"]).build(job["options"])
        kernel = cl.Kernel(program, job["entry"])
        mf = cl.mem_flags
        args = []
        for kind, value in job["args"]:
            if kind == "buffer":
                host = np.frombuffer(value, np.uint8).copy()
                args.append(cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host))
            elif kind == "local":
                args.append(cl.LocalMemory(value))
            else:
                args.append(value)
        kernel.set_args(*args)
        cl.enqueue_nd_range_kernel(queue, kernel, job["global"], job["local"])
        queue.finish()
    except cl.Error as e:
        print(json.dumps({"error": str(e).strip().splitlines()[0]}))
        return 0
    print(json.dumps({"device": device.name.strip(), "ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
