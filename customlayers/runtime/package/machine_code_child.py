"""The child process of machine_code.capture: load a package's binaries on one device, so
that its driver writes their machine code into the cache folder its environment names
(CUDA_CACHE_PATH, set by the parent). `python -m customlayers.runtime.package.machine_code_child
JOB_DIR`; JOB_DIR/job.json names the device (device_position's indices and its name) and the
binaries with their options."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(job_dir: str) -> int:
    from ..device.build import load_binary
    from ..device.device import open_engine_at
    job = Path(job_dir)
    spec = json.loads((job / "job.json").read_text())
    engine = open_engine_at(tuple(spec["position"]), spec["device"])
    for name, options in spec["programs"]:
        load_binary(engine.context, engine.device, (job / name).read_bytes(), options)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
