"""`customlayers compile -m MODEL [-c CONFIG...] [-l LAYERS.py] [-d DEVICE] [--shape ...]
[--tuning fast|full|off] [--keep-sources] -o model.clpkg`: the model compiled once for one
device and its input shapes (tuned as --tuning says), written as one package file that `run`,
`benchmark` and Network("model.clpkg") load with no sources, configs or tuning
(runtime/compile/packaged.py; the format: runtime/package/container.py, docs/packages.md)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import UsageError
from .model_args import add_model_options, load_network
from ..user_files.input_shapes import parse_shapes
from ..user_files.output import check_output_path
from ...files import size_text
from ...runtime.package.container import SUFFIX, is_package


def add_parser(sub):
    p = sub.add_parser("compile", help="compile a model for one device into a package file "
                                       "(.clpkg) that loads without sources or tuning",
                       description="Compile a model (its custom layers, tuning choices, memory "
                                   "plan and program binaries) for one device and its input "
                                   "shapes into one package file; run, benchmark and "
                                   "Network('model.clpkg') load it without -c, sources or "
                                   "tuning.")
    add_model_options(p, "compile")
    p.add_argument("-o", "--output", required=True, metavar=f"MODEL{SUFFIX}",
                   help=f"the package to write (atomically); its name ends with {SUFFIX}")
    p.epilog = ("--shape given again for an input starts another set of input shapes: "
                "--shape x=1x3x224x224 --shape x=8x3x224x224 compiles both into the package "
                "(inputs a set does not name keep the first set's shape)")
    p.add_argument("--keep-sources", action="store_true",
                   help="also keep the programs' generated OpenCL text in the package, so "
                        "that another device or driver rebuilds it from the package alone "
                        "(without it, no kernel source, descriptor or Python code is in it)")
    p.add_argument("--no-machine-code", action="store_true",
                   help="on an NVIDIA device, leave out the machine code its driver compiles "
                        "from the programs' PTX (then each machine compiles it at its first "
                        "load: about 0.08 s a program)")
    return p


def run(args) -> int:
    from ...runtime.compile.packaged import save_package
    if not args.output:
        raise UsageError(f"-o '': an empty path; name the package ({SUFFIX})")
    if not args.output.endswith(SUFFIX):
        raise UsageError(f"-o {args.output}: a package's name ends with {SUFFIX}")
    if Path(args.model).is_file() and is_package(args.model):   # before the options' notes
        raise UsageError(f"-m {args.model}: a compiled package already (plans, not a graph "
                         f"to compile); give compile the model it was made from (.xml or "
                         f".onnx), or run the package as it is: customlayers run -m "
                         f"{args.model}")
    # found now, not after the whole compile; a missing folder is made, as run -o makes one
    check_output_path(args.output, (SUFFIX,))
    started = time.perf_counter()
    sets = shape_sets(args.shape)
    args.shape = sets[0]
    engine, net, _ = load_network(args)
    first = {name: net.plan.descs[key].shape for name, key in net.plan.inputs}
    for items in sets[1:]:              # the other sets: one plan each, in the same package
        given = parse_shapes(items, net.input_names)
        net.plan_for({**first, **{n: g.shape for n, g in given.items()}})
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    manifest = save_package(net, args.output, keep_sources=args.keep_sources, model=args.model,
                            machine_code=not args.no_machine_code,
                            say=lambda m: print(m, file=sys.stderr))
    took = time.perf_counter() - started
    print(f"device: {engine.device.name.strip()} (driver {engine.device.driver_version})",
          file=sys.stderr)
    shapes = "; ".join(", ".join(f"{n}={list(s)}" for n, s in one.items())
                       for one in manifest["input_shapes"])
    size = sum(p["size"] for p in manifest["parts"])
    counts = " / ".join(str(c) for c in manifest["layers_per_plan"])
    print(f"compiled {counts} layers for {shapes} in {took:.1f} s: "
          f"{args.output} ({size_text(size)}, {len(manifest['programs'])} program binaries"
          f"{machine_code_text(manifest)}{', sources kept' if args.keep_sources else ''})")
    return 0


def machine_code_text(manifest: dict) -> str:
    code = manifest.get("machine_code")
    return f", NVIDIA machine code in {code['files']} files" if code else ""


def shape_sets(items: list[str]) -> list[list[str]]:
    """The --shape items in sets: an item naming an input the current set names already
    starts the next set."""
    sets: list[list[str]] = [[]]
    named: set[str] = set()
    for item in items:
        name = item.rpartition("=")[0] if "[" not in item else item.partition("[")[0]
        if name in named:
            sets.append([])
            named = set()
        sets[-1].append(item)
        named.add(name)
    return sets
