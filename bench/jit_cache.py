"""Cold build against cache hits, per example layer, measured in one run.

For every examples/layers/*/*.xml: generate the program (1x3x32x32 f32 inputs), then time
  cold   -- a fresh compilation (empty cache directory)
  disk   -- a new ProgramCache on the same directory: the binary is loaded, not compiled
  memory -- the same ProgramCache again
and print the ratios cold/disk and cold/memory. Usage: python bench/jit_cache.py [--repeat N]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# PoCL keeps its own compiled-kernel cache; without this, "cold" would often be its cache hit
os.environ.setdefault("POCL_KERNEL_CACHE", "0")

import pyopencl as cl  # noqa: E402

from customlayers.config import load_configs  # noqa: E402
from customlayers.errors import CustomLayersError  # noqa: E402
from customlayers.runtime.device.cache import ProgramCache  # noqa: E402
from customlayers.jit.program import generate_program  # noqa: E402
from customlayers.jit.tensor import TensorDesc  # noqa: E402
from customlayers.runtime.device.device import select_device  # noqa: E402


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def programs():
    for xml in sorted((ROOT / "examples" / "layers").glob("*/*.xml")):
        configs = load_configs([xml])
        for name, spec in configs.layers.items():
            desc = TensorDesc((1, 3, 32, 32))
            inputs = [desc] * spec.num_input_ports + [TensorDesc((3,))] * len(spec.data)
            try:
                yield name, generate_program(spec, inputs, [desc] * spec.num_output_ports)
            except CustomLayersError as e:
                print(f"skipped {name}: {e}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measure (best is kept)")
    parser.add_argument("-d", "--device", default=None)
    args = parser.parse_args()
    device = select_device(args.device)
    context = cl.Context([device])
    print(f"device: {device.name.strip()} ({device.platform.name.strip()})")
    rows = []
    for name, program in programs():
        cold, disk, memory = [], [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as folder:
                build = lambda cache: cache.build(context, device, program.text,  # noqa: E731
                                                  program.options, label=name)
                cold.append(timed(lambda: build(ProgramCache(folder, enabled=True))))
                warm = ProgramCache(folder, enabled=True)
                disk.append(timed(lambda: build(warm)))
                memory.append(timed(lambda: build(warm)))
                if warm.disk_hits != 1 or warm.hits != 1:
                    raise SystemExit(f"{name}: expected one disk hit and one memory hit")
        rows.append((name, min(cold), min(disk), min(memory)))
    if not rows:
        print("no example layers found under examples/layers", file=sys.stderr)
        return 1
    head = f"{'layer':<16}{'cold ms':>10}{'disk-hit ms':>13}{'memory-hit ms':>15}" \
           f"{'cold/disk':>11}{'cold/memory':>13}"
    print(head)
    for name, c, d, m in rows:
        print(f"{name:<16}{c:>10.1f}{d:>13.2f}{m:>15.4f}{c / d:>10.0f}x{c / m:>12.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
