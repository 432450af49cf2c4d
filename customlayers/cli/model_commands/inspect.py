"""`customlayers inspect model.clpkg`: what a compiled package holds, every part checked first:
its manifest (versions, the device it was built for, the input shapes), its layers and the
sizes of its parts. Needs no device."""
from __future__ import annotations

from ...errors import shape_text
from ...files import size_text


def add_parser(sub):
    p = sub.add_parser("inspect", help="show what a compiled package (.clpkg) holds",
                       description="Check a compiled package (customlayers compile) and print "
                                   "its manifest, its layers, the device it was built for and "
                                   "the sizes of its parts.")
    p.add_argument("package", metavar="MODEL.clpkg", help="the package to inspect")
    return p


def run(args) -> int:
    from ...runtime.package.codec import Decoder, loads
    from ...runtime.package.container import read_package
    pkg = read_package(args.package)
    m = pkg.manifest
    dev = m.get("device", {})
    graph = Decoder((), pkg.parts["arrays"], "graph").decode(loads(pkg.parts["graph"], "graph"))
    lines = [f"package: {args.package} (format {m['format_version']}, customlayers "
             f"{m.get('customlayers_version')}, made {m.get('created')})",
             f"model: {m.get('model')}",
             f"device: {dev.get('name')} ({dev.get('vendor')}; {dev.get('platform')}; driver "
             f"{dev.get('driver')}; {dev.get('opencl_version')})",
             "input shapes: " + "; ".join(", ".join(f"{n}={list(s)}" for n, s in one.items())
                                          for one in m.get("input_shapes", [])),
             f"tuning: {m.get('tuning')}; sources kept: {'yes' if m.get('keep_sources') else 'no'}"]
    declared = m.get("declared_inputs") or {}
    if any(s is None or None in s for s in declared.values()):
        lines.insert(4, "dynamic inputs as declared: " + ", ".join(
            f"{n}={'?' if s is None else shape_text(s)}"
            for n, s in declared.items()))
    for layer_type, cls, file in m.get("python_layers", []):
        lines.append(f"python layer: {layer_type} (class {cls} of {file}: load it with -l)")
    sets = m.get("input_shapes", [])
    if len(sets) > 1:       # the list is the first plan's; the others may fuse otherwise
        first = ", ".join(f"{n}={list(s)}" for n, s in sets[0].items())
        counts = " / ".join(str(c) for c in m.get("layers_per_plan", []))
        lines.append(f"layers of the plan for {first} ({len(graph['layers'])}; per plan: "
                     f"{counts or '?'}):")
    else:
        lines.append(f"layers ({len(graph['layers'])}):")
    width = max((len(name) for name, *_ in graph["layers"]), default=0)
    for name, layer_type, impl, kernels in graph["layers"]:
        lines.append(f"  {name:<{width}}  {layer_type} ({impl}, {kernels} kernel"
                     f"{'' if kernels == 1 else 's'})")
    parts = m["parts"]
    programs = [p for p in parts if p["name"].startswith("program ")]
    code = [p for p in parts if p["name"].startswith("machine code ")]
    lines.append("parts:")
    for p in parts:
        if not p["name"].startswith(("program ", "machine code ")):
            lines.append(f"  {p['name']:<8} {size_text(p['size'])}")
    lines.append(f"  programs {size_text(sum(p['size'] for p in programs))} in "
                 f"{len(programs)} binaries")
    if code:
        lines.append(f"  machine code {size_text(sum(p['size'] for p in code))} in "
                     f"{len(code)} files of NVIDIA's compute cache (put into CUDA_CACHE_PATH at "
                     f"load)")
    lines.append(f"total: {size_text(sum(p['size'] for p in parts))}")
    print("\n".join(lines))
    return 0

