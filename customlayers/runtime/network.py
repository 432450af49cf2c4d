"""Network: a graph compiled once for one device, then run many times (clDNN's split).

Compiling resolves every layer to an implementation (custom layers first, then built-ins),
infers shapes, inserts reorders where a custom layer asks for another format or padding, turns
every layer into KernelLaunch values, builds every program through the cache, and plans memory
by tensor lifetime. Running is done by InferRequest (runtime/request.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import (BindingError, CustomLayersError, ModelError, TensorError,
                      UnsupportedLayersError)
from ..graph.graph import Graph, Node
from ..jit.tensor import CUSTOM_LAYER_DTYPES, TensorDesc
from .launch import DeviceTraits, KernelLaunch
from .planner import MemoryPlan, TensorLife, plan_memory
from .reorder import reorder_launch

TensorKey = tuple  # (node id, output port) or ("reorder", n) / ("scratch", step, n)

SKIPPED_TYPES = ("Parameter", "Const", "Result")
# A graph input that a built-in op reads as a compile-time constant (a Reshape target, an
# Expand shape, Tile repeats) is compiled in by value; more elements than this is not a shape.
MAX_VALUE_INPUT_ELEMENTS = 64


@dataclass
class Step:
    """One layer (or an inserted reorder) as the executor runs it."""
    name: str
    type: str
    impl: str                         # "custom" | "built-in" | "reorder"
    entry: str
    launches: list[KernelLaunch]
    inputs: list[TensorKey]           # Arg.input(i) -> inputs[i]
    outputs: list[TensorKey]          # Arg.output(i) -> outputs[i]
    input_descs: list[TensorDesc] = field(default_factory=list)
    output_descs: list[TensorDesc] = field(default_factory=list)


@dataclass
class CompiledPlan:
    """Everything a request needs for one set of concrete input shapes."""
    steps: list[Step]
    descs: dict                       # TensorKey -> TensorDesc
    consts: dict                      # TensorKey -> np.ndarray (uploaded once, shared)
    alias: dict                       # view TensorKey -> the TensorKey whose buffer it shares
    inputs: list[tuple[str, TensorKey]]    # network input name -> tensor
    outputs: list[tuple[str, TensorKey]]   # network output name -> tensor
    memory: MemoryPlan
    programs: list                    # per step, per launch: pyopencl.Program

    def root(self, key):
        while key in self.alias:
            key = self.alias[key]
        return key


class Network:
    """A model compiled for a device. `infer` runs it; `create_request` gives parallel requests.

    graph: a Graph (graph/ir.py, graph/onnx_reader.py) or a path to a model file.
    registry: custom layers (runtime/registry.py); None = built-ins only.
    input_shapes: name -> shape for inputs whose size the model leaves open.
    input_values: name -> array for the value inputs (`value_inputs`: graph inputs a built-in
        op needs as a compile-time constant, such as a Reshape target fed by the caller);
        without them the plans are compiled at the first infer, one per set of values.
    pad_custom_inputs: (lower, upper) B,F,Y,X padding to hand every custom layer's inputs with
        (the contract says kernels must work on padded views; this proves it and is how a
        runtime would give a following convolution its halo).
    """

    def __init__(self, graph, registry=None, engine=None, *,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 input_values: Mapping[str, np.ndarray] | None = None,
                 profiling: bool = False, pad_custom_inputs=None, messages=None,
                 fuse: bool = True):
        from .device import Engine
        if not isinstance(graph, Graph):
            from ..graph.load import read_model
            graph = read_model(graph)
        self.graph = graph
        self.registry = registry
        self.engine = engine if engine is not None else (
            registry.engine if registry is not None and getattr(registry, "engine", None) else Engine())
        self.profiling = profiling
        self.pad_custom_inputs = pad_custom_inputs
        self.fuse = fuse                   # epilogue fusion (runtime/fusion.py)
        self._traits = DeviceTraits.of(self.engine.device)
        self._fp64 = _has_fp64(self.engine.device)   # f64 tensors (ONNX DOUBLE) need it
        self.messages: list[str] = []      # informational messages (overrides, memory plan)
        self._say = messages if messages is not None else (lambda m: None)
        self._order = graph.topological_order()
        self._check_supported()
        # graph input name -> the layer input that reads it as a constant (for messages)
        self.value_inputs: dict[str, str] = self._find_value_inputs()
        self._plans: dict[tuple, CompiledPlan] = {}
        self._idle_requests: dict[tuple, list] = {}
        self._default_key = None
        shapes = self._static_input_shapes(input_shapes or {})
        given_values = input_values or {}
        if shapes is not None and set(self.value_inputs) <= set(given_values):
            values = self._input_values(given_values, shapes)
            self._default_key = self._plan_key(shapes, values)
            self._plans[self._default_key] = self._compile(shapes, values)

    # -- resolution ------------------------------------------------------------------------
    def _is_custom(self, node: Node) -> bool:
        return self.registry is not None and node.type in self.registry

    def _check_supported(self) -> None:
        from ..ops import OPS
        missing, overrides = [], {}
        for node in self._order:
            if node.type in SKIPPED_TYPES:
                continue
            if self._is_custom(node):
                if node.type in OPS:
                    overrides.setdefault(node.type, []).append(node.name)
            elif node.type not in OPS:
                missing.append(node)
        if missing:
            lines = [f"  {n.name} (type {n.type}{', domain ' + n.domain if n.domain else ''})"
                     for n in missing]
            known = ", ".join(sorted(OPS))
            custom = ", ".join(self.registry.layer_types()) if self.registry is not None else "none"
            raise UnsupportedLayersError(
                f"{len(missing)} layer(s) of the model have no implementation:\n"
                + "\n".join(lines)
                + f"\nbuilt-in types: {known}\ncustom layers loaded: {custom}\n"
                "write a CustomLayer for them and pass its config with -c",
                [(n.name, n.type, n.domain) for n in missing])
        for layer_type, names in overrides.items():
            spec = self.registry.spec(layer_type)
            where = f"{spec.location.file}:{spec.location.line}"
            msg = (f"info: custom layer '{layer_type}' ({where}) overrides the built-in "
                   f"{layer_type} for {len(names)} layer(s)")
            self.messages.append(msg)
            self._say(msg)

    def _find_value_inputs(self) -> dict[str, str]:
        """Graph inputs that a built-in op reads as a compile-time constant (Op.const_inputs),
        directly or through shape-only views: their values are part of a plan's key."""
        from ..ops import OPS
        g = self.graph
        found: dict[str, str] = {}
        for node in self._order:
            if node.type in SKIPPED_TYPES or self._is_custom(node):
                continue
            for i in OPS[node.type].const_inputs:
                if i >= len(node.inputs):
                    continue
                src = g.nodes[g.producer(node.id, i)[0]]
                while (not self._is_custom(src) and src.type in OPS and OPS[src.type].is_view
                       and src.inputs):
                    src = g.nodes[g.producer(src.id, 0)[0]]
                if src.type == "Parameter":
                    found.setdefault(src.name, f"input {i} of layer '{node.name}' ({node.type})")
        return found

    def _input_values(self, arrays: Mapping[str, np.ndarray],
                      shapes: Mapping[str, tuple]) -> dict[str, np.ndarray]:
        """The value inputs' arrays, in their declared element type, checked to be small."""
        values = {}
        for name, why in self.value_inputs.items():
            if name not in arrays:
                raise ModelError(f"input '{name}' is {why}, which is compiled in as a constant: "
                                 f"give its value (infer with arrays, or input_values)")
            value = np.asarray(arrays[name])
            if value.size > MAX_VALUE_INPUT_ELEMENTS or value.dtype.kind not in "biuf":
                raise ModelError(f"input '{name}' is {why}, which is compiled in as a constant: "
                                 f"expected at most {MAX_VALUE_INPUT_ELEMENTS} numbers, found "
                                 f"{value.size} of type {value.dtype}")
            if name in shapes and tuple(value.shape) != tuple(shapes[name]):
                raise ModelError(f"input '{name}' has shape {list(value.shape)}, but shape "
                                 f"{list(shapes[name])} was given for it")
            node = next(p for p in self.graph.parameters if p.name == name)
            dtype = node.outputs[0].dtype if node.outputs and node.outputs[0].dtype else "i64"
            values[name] = value.astype(TensorDesc((), dtype).np_dtype)
        return values

    # -- shapes ----------------------------------------------------------------------------
    def _static_input_shapes(self, given: Mapping[str, Sequence[int]]):
        shapes = {}
        for p in self.graph.parameters:
            if p.name in given:
                shapes[p.name] = tuple(int(d) for d in given[p.name])
            elif p.outputs and p.outputs[0].shape is not None and \
                    all(d is not None for d in p.outputs[0].shape):
                shapes[p.name] = tuple(p.outputs[0].shape)
            else:
                return None   # dynamic: compiled per shape at the first infer
        unknown = set(given) - {p.name for p in self.graph.parameters}
        if unknown:
            raise ModelError(f"input(s) {', '.join(sorted(unknown))} are not inputs of the model; "
                             f"its inputs: {', '.join(p.name for p in self.graph.parameters)}")
        return shapes

    @staticmethod
    def _plan_key(shapes: Mapping[str, tuple], values: Mapping[str, np.ndarray]) -> tuple:
        """Plans differ by input shapes and by the values of the value inputs."""
        return (tuple(sorted((n, tuple(s)) for n, s in shapes.items())),
                tuple(sorted((n, tuple(v.reshape(-1).tolist())) for n, v in values.items())))

    @property
    def input_names(self) -> list[str]:
        return [p.name for p in self.graph.parameters]

    def plan_for(self, shapes: Mapping[str, tuple],
                 values: Mapping[str, np.ndarray] | None = None) -> CompiledPlan:
        """The compiled plan for these concrete input shapes and values of the value inputs
        (compiled on first use)."""
        values = self._input_values(values or {}, shapes)
        key = self._plan_key(shapes, values)
        plan = self._plans.get(key)
        if plan is None:
            for p in self.graph.parameters:
                declared = p.outputs[0].shape if p.outputs else ()
                got = shapes.get(p.name)
                if got is None:
                    raise ModelError(f"no value given for input '{p.name}'")
                if declared is None:       # an ONNX input of unknown rank takes any shape
                    continue
                if len(declared) != len(got) or any(d is not None and d != g
                                                    for d, g in zip(declared, got)):
                    raise ModelError(f"input '{p.name}' has shape {list(got)}; the model expects "
                                     f"{['?' if d is None else d for d in declared]}")
            plan = self._plans[key] = self._compile(dict(shapes), values)
        return plan

    @property
    def plan(self) -> CompiledPlan:
        if self._default_key is None:
            if self.value_inputs and self._static_input_shapes({}) is not None:
                raise ModelError(f"the model's input(s) {', '.join(self.value_inputs)} are "
                                 f"compiled in by value: give input_values, or call infer with "
                                 f"arrays (it compiles for their values)")
            raise ModelError("the model has inputs of unknown size: give input_shapes, or call "
                             "infer with arrays (it compiles for their shapes)")
        return self._plans[self._default_key]

    # -- compilation -----------------------------------------------------------------------
    def _compile(self, input_shapes: Mapping[str, tuple],
                 input_values: Mapping[str, np.ndarray]) -> CompiledPlan:
        from ..ops import OPS
        g = self.graph
        descs: dict = {}
        consts: dict = {}
        alias: dict = {}
        steps: list[Step] = []
        inputs: list[tuple[str, TensorKey]] = []
        outputs: list[tuple[str, TensorKey]] = []
        fusions = self._plan_fusions()
        absorbed = {nid: owner for owner, ep in fusions.items() for nid in ep.absorbed}

        for node in self._order:
            try:
                if node.type == "Parameter":
                    dtype = node.outputs[0].dtype if node.outputs else "f32"
                    descs[(node.id, 0)] = TensorDesc(input_shapes[node.name], dtype)
                    if node.name in input_values:   # compiled in: no input buffer
                        consts[(node.id, 0)] = input_values[node.name]
                    else:
                        inputs.append((node.name, (node.id, 0)))
                    continue
                if node.type == "Const":
                    value = np.asarray(node.value)
                    consts[(node.id, 0)] = value
                    descs[(node.id, 0)] = TensorDesc(value.shape, value.dtype)
                    continue
                if node.id in absorbed:           # computed by the kernel it was fused into
                    owner = (absorbed[node.id], 0)
                    descs[(node.id, 0)] = descs[owner]
                    alias[(node.id, 0)] = owner
                    continue
                in_keys = [g.producer(node.id, i) for i in range(len(node.inputs))]
                in_descs = [descs[k] for k in in_keys]
                if node.type == "Result":
                    src = in_keys[0]
                    sn = g.nodes[src[0]]
                    names = sn.outputs[src[1]].names
                    outputs.append((names[0] if names else node.name, src))
                    continue
                in_consts = {i: consts[k] for i, k in enumerate(in_keys) if k in consts}
                if self._is_custom(node):
                    new_steps = self._custom_steps(node, in_keys, in_descs, in_consts)
                else:
                    op = OPS[node.type]
                    # what the op may know of the device to choose its kernels
                    attrs = dict(op.parse_attributes(node.attrs, node.name), _device=self._traits)
                    out_specs = op.infer_shapes(attrs, in_descs, in_consts)
                    out_descs = [TensorDesc(shape, dtype) for shape, dtype in out_specs]
                    self._check_declared_shapes(node, out_descs)
                    self._check_fp64(node, in_descs + out_descs)
                    out_keys = [(node.id, j) for j in range(len(out_descs))]
                    if op.is_view:
                        descs[out_keys[0]] = out_descs[0]
                        alias[out_keys[0]] = in_keys[0]
                        if in_keys[0] in consts:
                            consts[out_keys[0]] = consts[in_keys[0]].reshape(out_descs[0].shape)
                        continue
                    step_type = node.type
                    ep = fusions.get(node.id)
                    if ep is not None:            # bias and ReLU computed where it stores
                        in_keys, in_descs = self._fold_epilogue(node, ep, in_keys, in_descs,
                                                                out_descs[0], consts, descs)
                        attrs = dict(attrs, _bias=bool(ep.steps), _relu=ep.relu)
                        step_type = f"{node.type}+{ep.label}"
                    launches = op.launches(attrs, in_descs, out_descs, in_consts)
                    new_steps = [Step(node.name, step_type, "built-in",
                                      ",".join(dict.fromkeys(l.entry for l in launches)),
                                      launches, list(in_keys), out_keys, in_descs, out_descs)]
                for st in new_steps:
                    for k, d in zip(st.outputs, st.output_descs):
                        descs[k] = d
                steps.extend(new_steps)
            except CustomLayersError as e:
                # say which layer, unless the error already does; its own fields stay as they are
                if e.context is None and f"'{node.name}'" not in str(e):
                    e.context = node.describe()
                raise

        memory = self._plan_memory(steps, descs, alias, consts, inputs, outputs)
        programs = self._build(steps)
        plan = CompiledPlan(steps, descs, consts, alias, inputs, outputs, memory, programs)
        self.messages.append(memory.summary())
        return plan

    @staticmethod
    def _fold_epilogue(node, ep, in_keys, in_descs, out_desc, consts, descs):
        """Collapse the fused chain into one bias input (and weights scaled per channel)."""
        channels = out_desc.shape[1]
        scale, bias = ep.scale_and_bias(channels)
        if ep.has_scale:
            w = np.asarray(consts[in_keys[1]], np.float64)
            # output channel o is w's axis 0 (OIYX) or axes 0,1 together (GOIYX)
            lead = 2 if node.type == "GroupConvolution" else 1
            folded = (w.reshape(w.shape[:lead] + (-1,)) *
                      scale.reshape(w.shape[:lead] + (1,))).reshape(w.shape)
            wkey = ("folded_weights", node.id)
            consts[wkey] = folded.astype(np.float32)
            descs[wkey] = in_descs[1]
            in_keys = [in_keys[0], wkey] + in_keys[2:]
        bkey = ("fused_bias", node.id)
        consts[bkey] = bias.astype(np.float32)
        descs[bkey] = TensorDesc((channels,))
        return in_keys + [bkey], in_descs + [descs[bkey]]

    def _plan_fusions(self) -> dict:
        if not self.fuse:
            return {}
        from ..ops import OPS
        from .fusion import plan_fusions
        fusable = {t for t, op in OPS.items() if getattr(op, "fusable_epilogue", False)}
        return plan_fusions(self.graph, self._order, fusable, self._is_custom)

    def _check_declared_shapes(self, node: Node, out_descs: list[TensorDesc]) -> None:
        for j, (port, desc) in enumerate(zip(node.outputs, out_descs)):
            declared = port.shape
            if declared is None or any(d is None for d in declared):
                continue
            if tuple(declared) != tuple(desc.shape):
                raise ModelError(f"{node.describe()}: output port {j} is declared as "
                                 f"{list(declared)} but the inputs give {list(desc.shape)}")

    def _check_fp64(self, node: Node, descs: Sequence[TensorDesc]) -> None:
        if not self._fp64 and any(d.dtype == "f64" for d in descs):
            raise BindingError(f"{node.describe()}: f64 (double) tensors need a device with "
                               f"cl_khr_fp64; {self.engine.device.name.strip()} has none (convert "
                               f"the model to float32)")

    def _custom_steps(self, node: Node, in_keys, in_descs, in_consts) -> list[Step]:
        """Bind a custom layer: real inputs by port, Data blobs from Const inputs by name.
        Returns its steps in order: reorders of its inputs, the layer, reorders of its outputs
        back to dense BFYX (what the rest of the graph reads)."""
        for i, d in enumerate(in_descs):
            if d.dtype not in CUSTOM_LAYER_DTYPES:   # the contract's <T>_TYPE list has no double
                raise BindingError(f"{node.describe()}: input {i} is {d.dtype}; a custom layer "
                                   f"takes {', '.join(CUSTOM_LAYER_DTYPES)}")
        spec = self.registry.spec(node.type)
        data_names = {d.name for d in spec.data}
        g = self.graph
        real_ports: list[int] = []
        data: dict[str, np.ndarray] = {}
        for i, k in enumerate(in_keys):
            producer = g.nodes[k[0]]
            pnames = {producer.name, producer.name.rsplit("/", 1)[-1],
                      *producer.outputs[k[1]].names, *node.inputs[i].names}
            match = data_names & pnames
            if i in in_consts and match:
                data[match.pop()] = in_consts[i]
            else:
                real_ports.append(i)
        missing = data_names - set(data)
        if missing:
            raise BindingError(f"the descriptor binds Data {', '.join(sorted(missing))}, but the "
                               f"layer has no constant input of that name")
        bound_ports = {t.port_index for t in spec.inputs}
        if bound_ports and max(bound_ports) >= len(real_ports):
            raise BindingError(f"the descriptor binds input port {max(bound_ports)}, but the layer "
                               f"has {len(real_ports)} input(s)")
        steps: list[Step] = []
        kernel_inputs: list[TensorKey] = []
        kernel_descs: list[TensorDesc] = []
        by_port = {t.port_index: t for t in spec.inputs}
        for port, i in enumerate(real_ports):
            key, desc = in_keys[i], in_descs[i]
            binding = by_port.get(port)
            want = desc
            if binding is not None and binding.format not in ("ANY", desc.format):
                want = want.with_format(binding.format)
            if self.pad_custom_inputs is not None:
                lower, upper = self.pad_custom_inputs
                want = want.with_padding(lower, upper)
            if want != desc:
                rkey = ("in", node.id, port)
                steps.append(Step(f"{node.name}/reorder_in{port}", "Reorder", "reorder", "reorder",
                                  [reorder_launch(desc, want)], [key], [rkey], [desc], [want]))
                key, desc = rkey, want
            kernel_inputs.append(key)
            kernel_descs.append(desc)

        # output shapes: declared in the model, else the descriptor's shape formula, else input 0
        out_descs = []
        for binding in spec.outputs:
            port = node.outputs[binding.port_index] if binding.port_index < len(node.outputs) else None
            shape = _output_shape(node, spec, binding, port, kernel_descs)
            fmt = binding.format if binding.format != "ANY" else kernel_descs[0].format
            dtype = port.dtype if port is not None and port.dtype else kernel_descs[0].dtype
            out_descs.append(TensorDesc(shape, dtype, fmt))
        bound = self.registry.bind(node.type, kernel_descs, out_descs, params=node.attrs, data=data)
        out_keys, after = [], []
        for j, d in enumerate(out_descs):
            if d.is_plain:
                out_keys.append((node.id, j))
            else:
                raw = ("out", node.id, j)
                out_keys.append(raw)
                after.append(Step(f"{node.name}/reorder_out{j}", "Reorder", "reorder", "reorder",
                                  [reorder_launch(d, d.plain())], [raw], [(node.id, j)], [d],
                                  [d.plain()]))
        steps.append(Step(node.name, node.type, "custom", spec.entry, [bound.launch()],
                          kernel_inputs, out_keys, kernel_descs, out_descs))
        return steps + after

    def _plan_memory(self, steps, descs, alias, consts, inputs, outputs) -> MemoryPlan:
        first: dict = {}
        last: dict = {}
        end = len(steps)
        for i, s in enumerate(steps):
            for k in s.outputs:
                first.setdefault(k, i)
                last[k] = max(last.get(k, i), i)
            for k in s.inputs:
                r = k
                while r in alias:
                    r = alias[r]
                last[r] = max(last.get(r, i), i)
        for _, k in outputs:
            r = k
            while r in alias:
                r = alias[r]
            last[r] = end
        input_keys = {k for _, k in inputs}
        lives = [TensorLife(k, descs[k].nbytes, first[k], last[k]) for k in first
                 if k not in consts and k not in input_keys]
        return plan_memory(lives)

    def _build(self, steps: list[Step]) -> list:
        eng = self.engine
        programs = []
        for s in steps:
            progs = []
            for launch in s.launches:
                try:
                    progs.append(eng.cache.build(eng.context, eng.device, launch.source,
                                                 launch.options, line_map=launch.line_map,
                                                 label=launch.label or s.name))
                except CustomLayersError as e:
                    if hasattr(e, "layer") and not getattr(e, "layer", None):
                        e.layer = s.name
                    raise
            programs.append(progs)
        return programs

    # -- running ---------------------------------------------------------------------------
    def create_request(self, shapes: Mapping[str, tuple] | None = None,
                       values: Mapping[str, np.ndarray] | None = None):
        """A request for the default plan, or for these shapes (and values of the value
        inputs). A request runs its plan's values: inputs of other values need another one."""
        from .request import InferRequest
        plan = self.plan if shapes is None else self.plan_for(shapes, values)
        return InferRequest(self, plan)

    def _request_for(self, arrays: Mapping[str, np.ndarray]):
        shapes = {n: tuple(a.shape) for n, a in arrays.items()}
        values = self._input_values(arrays, shapes)
        key = self._plan_key(shapes, values)
        pool = self._idle_requests.setdefault(key, [])
        for req in pool:
            if not req.busy:
                return req
        req = self.create_request(shapes, values)
        pool.append(req)
        return req

    def _named_inputs(self, inputs) -> dict[str, np.ndarray]:
        names = self.input_names
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, Mapping):
            unknown = set(inputs) - set(names)
            if unknown:
                raise ModelError(f"input(s) {', '.join(sorted(unknown))} are not inputs of the "
                                 f"model; its inputs: {', '.join(names)}")
            missing = [n for n in names if n not in inputs]
            if missing:
                raise ModelError(f"no value given for input(s) {', '.join(missing)}")
            return {n: np.asarray(inputs[n]) for n in names}
        inputs = list(inputs)
        if len(inputs) != len(names):
            raise ModelError(f"the model has {len(names)} input(s) ({', '.join(names)}); "
                             f"{len(inputs)} given")
        return {n: np.asarray(a) for n, a in zip(names, inputs)}

    def infer_async(self, inputs):
        """Start one inference; returns the InferRequest (call .wait() for the outputs)."""
        arrays = self._named_inputs(inputs)
        req = self._request_for(arrays)
        req.start(arrays)
        return req

    def infer(self, inputs) -> dict[str, np.ndarray]:
        """Run once and return {output name: array}. The host waits once, for the outputs."""
        return self.infer_async(inputs).wait()

    @property
    def output_names(self) -> list[str]:
        return [n for n, _ in self.plan.outputs]


def _has_fp64(device) -> bool:
    """Whether the device computes in double (OpenCL 1.2+: a double_fp_config; the extension)."""
    try:
        if int(device.double_fp_config):
            return True
    except Exception:                      # noqa: BLE001 - drivers without the query
        pass
    return "cl_khr_fp64" in device.extensions.split()


def _output_shape(node: Node, spec, binding, port, input_descs) -> tuple[int, ...]:
    """A custom layer's output shape (ONNX shape inference cannot know it), in this order:
    the model's declared shape when fully known (IR port dims, ONNX value_info); else the
    descriptor's `shape` formula over the dim tensor; else input 0's shape. The declared dims
    that are known still count: a formula must agree with them, and without a formula a partly
    declared shape (value_info ["N",16,3,4] with a dynamic batch) takes only its open dims from
    input 0."""
    declared = tuple(port.shape) if port is not None and port.shape is not None else None
    if binding.shape:
        computed = _shape_from_formula(spec, binding, input_descs)
        source = f"the descriptor's shape formula '{binding.shape}'"
    elif declared is not None and all(d is not None for d in declared):
        return declared
    else:
        computed, source = tuple(input_descs[0].shape), "input 0"
        if declared is not None and len(declared) == len(computed):
            computed = tuple(c if d is None else d for d, c in zip(declared, computed))
    if declared is not None and (len(declared) != len(computed) or any(
            d is not None and d != c for d, c in zip(declared, computed))):
        # a wrong output shape is memory the kernel writes past: refuse the disagreement
        shown = ["?" if d is None else d for d in declared]
        raise ModelError(f"{node.describe()}: output port {binding.port_index} is declared as "
                         f"{shown} in the model, but {source} gives {list(computed)}"
                         f"{'' if binding.shape else '; give its output Tensor a shape formula'}")
    return computed


def _shape_from_formula(spec, binding, input_descs) -> tuple[int, ...]:
    from ..jit.formulas import parse_formula_list
    dim_kind, dim_index = spec.work_sizes.dim
    if dim_kind == "input" and dim_index < len(input_descs):
        dims = input_descs[dim_index].dims
    else:
        dims = input_descs[0].dims
    env = dict(zip("BFYX", dims))
    env.update({k.lower(): v for k, v in env.items()})
    formulas = parse_formula_list(binding.shape, max_entries=4)
    shape = tuple(f.evaluate(env) for f in formulas)
    if any(d <= 0 for d in shape):
        raise TensorError(f"layer type '{spec.name}': output shape formula '{binding.shape}' gives "
                          f"{list(shape)} for input dims {list(dims)}")
    return shape
