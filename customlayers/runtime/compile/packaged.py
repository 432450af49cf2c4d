"""A Network's compiled plans as a package file (runtime/package/), and the plans back out of
one: `save_package(net, path)` (the `compile` command), `load_package(path, engine, ...)`
(Network("model.clpkg")).

A package holds, per set of input shapes it was compiled for, the CompiledPlan as the
executor runs it (steps with their launches, tensor descriptions, constants, aliases, the
memory plan, the variables), a skeleton of the graph (its inputs, outputs and variables: the
names and declared shapes a Network answers with), and the program binaries for one device.
A launch's source is replaced by its program's key; the sources themselves are kept only with
`keep_sources` (then another device or driver rebuilds from them). Loading runs no graph
rewrite, resolver, descriptor, tuning or build: the plans are made straight from the file.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ... import __version__
from ...errors import ModelError, PackageError
from ...graph.graph import Graph, Node, Port
from ...graph.variables import ASSIGN, READ_VALUE
from ...jit.launch import Arg, KernelLaunch
from ...jit.layer import Stage
from ...jit.tensor import TensorDesc
from ..package.codec import Decoder, Encoder, dumps, loads
from ..package.container import read_package, write_package
from ..package.host_layers import (PythonHostStep, missing, missing_message, rebuild,
                                   record)
from ..package.machine_code import (PART_PREFIX, capture_machine_code, has_driver_cache,
                                    install_machine_code)
from ..package.programs import (binaries_of, build_from_sources, device_description,
                                differences, load_binaries, program_key)
from .plan import CompiledPlan
from .planner import MemoryPlan

# the classes a package's plans are made of: the codec constructs these and nothing else
CLASSES = (Stage, KernelLaunch, Arg, TensorDesc, PythonHostStep)
# the nodes the skeleton keeps: what a loaded Network names and checks inputs, outputs and
# variables by
SKELETON_TYPES = ("Parameter", "Result", READ_VALUE, ASSIGN)
_PLAN_FIELDS = ("descs", "consts", "alias", "inputs", "outputs", "notes", "offsets",
                "in_place", "device_bytes", "boolean_outputs", "states")


@dataclass
class LoadedPackage:
    """What a Network is made of when it is loaded from a package."""
    path: str
    manifest: dict
    graph: Graph
    plans: dict                 # plan key (plan_keys.plan_key) -> CompiledPlan
    default_key: tuple
    value_inputs: dict
    seconds: float              # reading, checking and loading the programs

    def other_shapes(self, shapes) -> PackageError:
        compiled = "; ".join(_shapes_text(dict(key[0])) for key in self.plans)
        example = " ".join(f"--shape {n}={'x'.join(map(str, s))}" for n, s in shapes.items())
        other = Path(self.path).with_name(f"{Path(self.path).stem}-other.clpkg").name
        return PackageError(f"the package {self.path} was compiled for input shapes "
                            f"{compiled}; these are {_shapes_text(shapes)}: compile a package "
                            f"for them from the model, where it allows those shapes "
                            f"(customlayers compile -m MODEL [-c CONFIG...] {example} -o "
                            f"{other}; --shape given again keeps several sets in one "
                            f"package)")


def _shapes_text(shapes: dict) -> str:
    return ", ".join(f"{n}={list(s)}" for n, s in shapes.items())


# -- saving ------------------------------------------------------------------------------------
def save_package(net, path, *, keep_sources: bool = False, model: str = "",
                 machine_code: bool = True, say=lambda m: None) -> dict:
    """Write every plan `net` has compiled, with its programs' binaries for its device, to
    `path` (atomically); the manifest written. ModelError when it has compiled none.
    machine_code: on an NVIDIA device, also the machine code its driver compiles from the
    binaries (package/machine_code.py), so that a load on a fresh machine compiles nothing;
    `say` gets a notice where it cannot be captured."""
    if getattr(net, "package", None) is not None:
        raise PackageError(f"the network was loaded from the package {net.package.path}: "
                           f"compile the model itself")
    if not net._plans:
        raise ModelError("the network has no compiled plan to package: give the shapes of its "
                         "inputs (input_shapes, --shape NAME=1x3x224x224)")
    enc = Encoder(CLASSES)
    built: dict = {}                 # program key -> cl.Program
    sources: dict = {}               # program key -> (source, options, label)
    plans, records = [], []
    keys = list(net._plans)
    if net._default_key in keys:     # the default plan first: the loaded network's default
        keys.remove(net._default_key)
        keys.insert(0, net._default_key)
    for key in keys:
        plan = net._plans[key]
        steps, programs = [], []
        for step, built_step in zip(plan.steps, plan.programs):
            launches, names = [], []
            for launch, program in zip(step.launches, built_step):
                k = program_key(launch.source, launch.options)
                built.setdefault(k, program)
                sources.setdefault(k, (launch.source, launch.options, launch.label or step.name))
                launches.append(replace(launch, source=f"program {k}", line_map=()))
                names.append(k)
            host = record(step) if step.host is not None else None
            if host is not None:
                records.append(host)
            steps.append(replace(step, launches=launches, host=host))
            programs.append(names)
        memory = plan.memory
        fields = {f: getattr(plan, f) for f in _PLAN_FIELDS}
        read = _tensors_read(plan)
        fields["consts"] = {k: v for k, v in plan.consts.items() if k in read}
        plans.append(enc.encode({
            "key": key, "steps": steps, "programs": programs,
            "memory": {"slot_sizes": memory.slot_sizes, "slot_of": memory.slot_of,
                       "total_tensor_bytes": memory.total_tensor_bytes,
                       "in_place_tensors": memory.in_place_tensors,
                       "guards": memory.guards},
            **fields}))
    device = net.engine.device
    binaries = binaries_of(device, built)
    graph = {"name": net.graph.name, "value_inputs": net.value_inputs,
             "nodes": [_node_record(n) for n in net.graph if n.type in SKELETON_TYPES],
             "layers": [[s.name, s.type, s.impl, len(s.launches)]
                        for s in net._plans[keys[0]].steps]}
    parts = [("graph", dumps(enc.encode(graph))), ("plans", dumps(plans)),
             ("arrays", bytes(enc.blob))]
    parts += [(f"program {k}", binaries[k]) for k in sorted(binaries)]
    code, why = capture_machine_code(device, {k: (binaries[k], sources[k][1])
                                              for k in sorted(binaries)}) \
        if machine_code else ([], "")
    if why:
        say(f"note: the package holds no NVIDIA machine code ({why}): its first load on each "
            f"machine compiles its programs' PTX (about 0.08 s a program). A GPU in the "
            f"exclusive-process compute mode lets no second process open it; "
            f"--no-machine-code skips this step")
    parts += [(f"{PART_PREFIX}{rel}", data) for rel, data in code]
    if keep_sources:
        parts.append(("sources", dumps({k: list(v) for k, v in sorted(sources.items())})))
    manifest = {
        "customlayers_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model": Path(model).name if model else net.graph.name,
        "device": device_description(device),
        "programs": {k: {"options": sources[k][1], "label": sources[k][2],
                         "size": len(binaries[k])} for k in sorted(binaries)},
        "input_shapes": [dict(key[0]) for key in keys],
        # as the model declares them: None for a dynamic dimension
        "declared_inputs": {p.name: p.outputs[0].shape if p.outputs else None
                            for p in net.graph.parameters},
        "value_inputs": [dict(key[1]) for key in keys],
        "tuning": net.tuner.mode if net.tuner is not None else "off",
        "keep_sources": bool(keep_sources),
        "machine_code": {"files": len(code), "size": sum(len(d) for _, d in code)}
        if code else None,
        "python_layers": sorted({(r.layer_type, r.class_name, r.file) for r in records}),
        "layers": len(graph["layers"]),
        # each plan's own count (the graph's list is the first plan's: with open inputs the
        # plans fuse on their own shapes, and may differ)
        "layers_per_plan": [len(net._plans[key].steps) for key in keys],
    }
    return write_package(path, manifest, parts)


def _tensors_read(plan: CompiledPlan) -> set:
    """The tensors a request of `plan` reads or writes, with every tensor on their alias
    chains: the constants among them are the ones a package keeps. A convolution on a CPU
    device reads its weights packed (an Arg.const) and never its input 1: the model's own
    weights and their folded copy are not kept beside the packed ones (ResNet-50's package
    was three times its weights)."""
    keys = [k for _, k in plan.outputs]
    for step in plan.steps:
        if step.host is not None:
            keys += [*step.inputs, *step.outputs]
        for launch in step.launches:
            for arg in launch.args:
                if arg.kind == "input":
                    keys.append(step.inputs[arg.index])
                elif arg.kind == "output":
                    keys.append(step.outputs[arg.index])
    read = set()
    for key in keys:
        read.add(key)
        while key in plan.alias:
            key = plan.alias[key]
            read.add(key)
    return read


def _node_record(node: Node) -> dict:
    return {"id": node.id, "name": node.name, "type": node.type, "attrs": dict(node.attrs),
            "inputs": [_port(p) for p in node.inputs],
            "outputs": [_port(p) for p in node.outputs], "location": node.location}


def _port(p: Port) -> tuple:
    return (None if p.shape is None else tuple(p.shape), p.dtype, tuple(p.names))


# -- loading -----------------------------------------------------------------------------------
def load_package(path, engine, registry=None, say=lambda m: None) -> LoadedPackage:
    """The package at `path` checked and its plans made for `engine`: its programs loaded from
    their binaries (the device, driver and our version match), else rebuilt from its sources
    (kept) with a notice, else a PackageError naming what differs."""
    started = time.perf_counter()
    pkg = read_package(path)
    parts = pkg.parts
    for name in ("graph", "plans", "arrays"):
        if name not in parts:
            raise PackageError(f"the package {path} lacks its part '{name}'", name)
    with _malformed("graph"):
        graph_struct = Decoder(CLASSES, parts["arrays"], "graph").decode(
            loads(parts["graph"], "graph"))
        graph = _skeleton(graph_struct)
        value_inputs = dict(graph_struct["value_inputs"])
    with _malformed("plans"):
        decoder = Decoder(CLASSES, parts["arrays"], "plans")
        plans_struct = [decoder.decode(p) for p in loads(parts["plans"], "plans")]
        if not plans_struct:
            raise ValueError("no plan")
        records = [s.host for p in plans_struct for s in p["steps"]
                   if isinstance(s.host, PythonHostStep)]
    absent = missing(records, registry)
    if absent:
        raise PackageError(f"{path}: {missing_message(absent)}")
    programs = _programs(pkg, engine, say)
    sources = _sources(pkg)
    plans = {}
    with _malformed("plans"):
        for p in plans_struct:
            plans[p["key"]] = _plan(p, programs, registry, sources)
    return LoadedPackage(str(path), pkg.manifest, graph, plans, plans_struct[0]["key"],
                         value_inputs, time.perf_counter() - started)


@contextmanager
def _malformed(part: str):
    """A part that passed its checksum but is not what we write (edited, its hash made anew):
    a PackageError naming it, never a traceback."""
    try:
        yield
    except PackageError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise PackageError(f"the package's part '{part}' is malformed ({type(e).__name__}: "
                           f"{e})", part) from None


def _sources(pkg) -> dict:
    if "sources" not in pkg.parts:
        return {}
    found = loads(pkg.parts["sources"], "sources")
    if not isinstance(found, dict) or not all(
            isinstance(v, list) and len(v) == 3 and all(isinstance(x, str) for x in v)
            for v in found.values()):
        raise PackageError("the package's part 'sources' is malformed", "sources")
    return {k: tuple(v) for k, v in found.items()}


def _programs(pkg, engine, say) -> dict:
    manifest = pkg.manifest
    wanted = manifest.get("programs")
    if not isinstance(wanted, dict):
        raise PackageError(f"the package {pkg.path}: its manifest lists no programs", "manifest")
    differ = differences(manifest, engine.device)
    sources = _sources(pkg)
    if differ:
        built = manifest.get("device", {})
        what = (f"the package {pkg.path} was built for {built.get('name')} (driver "
                f"{built.get('driver')}, customlayers {manifest.get('customlayers_version')})"
                f"; this is {engine.device.name.strip()} (driver "
                f"{engine.device.driver_version.strip()}, customlayers {__version__}): "
                f"{'; '.join(differ)} {'differs' if len(differ) == 1 else 'differ'}")
        if not sources:
            raise PackageError(f"{what}. Its binaries run only there, and it holds no "
                               f"sources: make a package for this device (customlayers "
                               f"compile -m MODEL -d DEVICE -o {Path(pkg.path).name}), or "
                               f"compile with --keep-sources to rebuild it anywhere",
                               "device")
        say(f"note: {what}; rebuilding its {len(sources)} programs from the sources it keeps")
        return build_from_sources(engine, sources)
    binaries = {}
    for key, info in wanted.items():
        part = pkg.parts.get(f"program {key}")
        if part is None or not isinstance(info, dict) or \
                not isinstance(info.get("options"), str):
            raise PackageError(f"the package {pkg.path} lacks the binary of program {key[:16]}",
                               f"program {key}")
        binaries[key] = (bytes(part), info["options"])
    # before the binaries, so that the driver finds their code
    install_machine_code(pkg.parts, has_driver_cache(engine.device), say)
    return load_binaries(engine, binaries)


def _plan(p: dict, programs: dict, registry, sources: dict) -> CompiledPlan:
    """The CompiledPlan of a decoded plan record."""
    steps = []
    for step, names in zip(p["steps"], p["programs"], strict=True):
        _check_step(step)
        launches = [replace(launch, source=sources[k][0]) if k in sources else launch
                    for launch, k in zip(step.launches, names, strict=True)]
        host = rebuild(step.host, registry) if step.host is not None else None
        steps.append(replace(step, launches=launches, host=host))
    built = [[programs[k] for k in names] for names in p["programs"]]
    return CompiledPlan(steps, p["descs"], p["consts"], p["alias"], p["inputs"], p["outputs"],
                        MemoryPlan(**p["memory"]), built, notes=p["notes"],
                        offsets=p["offsets"], in_place=p["in_place"],
                        device_bytes=tuple(p["device_bytes"]),
                        boolean_outputs=frozenset(p["boolean_outputs"]), states=p["states"])


def _check_step(step) -> None:
    """The types the executor relies on (ValueError otherwise: a malformed part)."""
    def ints(v, none=False):
        return (none and v is None) or (isinstance(v, tuple) and
                                        all(type(d) is int for d in v))
    ok = isinstance(step, Stage) and all(
        isinstance(getattr(step, f), list) for f in ("launches", "inputs", "outputs",
                                                     "input_descs", "output_descs")) and \
        all(isinstance(d, TensorDesc) for d in step.input_descs + step.output_descs) and \
        (step.host is None or isinstance(step.host, PythonHostStep))
    for launch in step.launches if ok else ():
        ok = ok and isinstance(launch, KernelLaunch) and isinstance(launch.entry, str) and \
            isinstance(launch.options, str) and ints(launch.global_size) and \
            ints(launch.local_size, none=True) and isinstance(launch.args, tuple) and \
            all(isinstance(a, Arg) for a in launch.args)
    if not ok:
        raise ValueError(f"step {getattr(step, 'name', '?')!r} is not a plan step")


def _skeleton(struct: dict) -> Graph:
    """The graph's inputs, outputs and variables as nodes (no edges, no values)."""
    graph = Graph(struct.get("name", "model"))
    for n in struct["nodes"]:
        graph.add_node(Node(n["id"], n["name"], n["type"], dict(n["attrs"]),
                            [Port(*p) for p in n["inputs"]], [Port(*p) for p in n["outputs"]],
                            location=n["location"]))
    return graph
