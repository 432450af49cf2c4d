"""Compiling a network's graph for concrete input shapes (clDNN's "program" step).

Every layer node has an implementation (resolver.py; passes/fusion.py may replace a chain's head with a
ChannelAffine), and every implementation is asked the same two questions through the one layer
interface (jit/layer.py): its output tensors, then its work as stages of KernelLaunch values.
The compiler checks the answers against the model, folds fused epilogues, wires the stages'
tensors to the plan's keys, plans memory by tensor lifetime (planner.py), and builds every
program through the cache. It has no branch per kind of implementation.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from ...errors import BindingError, CustomLayersError, DeviceError, ModelError
from ...graph.graph import Graph, Node
from ...graph.variables import check_variables
from ...jit.launch import CompileContext, DeviceTraits
from ...jit.layer import LayerCall, LayerImpl, LayerWork, state_ref
from ...jit.tensor import TensorDesc
from .concat_in_place import ConcatCandidate, place_concat_inputs
from .compiled_values import compiled_in, is_empty, settle_empty
from ...passes.fusion import FusionPlan
from ...ops import half_storage
from ..device.parallel_build import build_jobs, build_programs
from .plan_buffers import check_device_memory, plan_buffers, plan_memory_of
from .plan import CompiledPlan, Step, TensorKey
from .plan_states import register_states


@dataclass(frozen=True)
class PlanOptions:
    """What every plan of a network is compiled with."""
    device: DeviceTraits
    device_name: str
    fp64: bool                                  # the device computes in double
    custom_input_padding: tuple | None = None   # Network(pad_custom_inputs=...)
    # bytes a sub-buffer's origin must be a multiple of (CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8):
    # Concats run in place where their slices start there (concat_in_place.py); 0: none does
    concat_alignment: int = 0
    # chooses each layer's kernel variant by timing (tuning.py); None: the heuristics' picks
    tuner: object = field(default=None, compare=False)
    fp16: bool = True                           # the device computes in half (cl_khr_fp16)


def compile_plan(graph: Graph, order: Sequence[Node], impls: Mapping[str, LayerImpl],
                 fusion: FusionPlan, engine, options: PlanOptions,
                 input_shapes: Mapping[str, tuple],
                 input_values: Mapping[str, np.ndarray], *,
                 layers_only: bool = False, folded: dict | None = None) -> CompiledPlan | None:
    """Compile the graph for concrete input shapes (and values of its value inputs).
    layers_only: walk the layers and stop there, planning and building nothing (None): a
    tuner collecting every layer's candidates to build them together (tuning.py); no layer's
    own work (launches, packed weights) is made then, only the tuner's choices.
    folded: the weights scaled by fused epilogues, by node, shared by the walks of one graph
    (the tuner's walk and the compile after it fold each layer's weights once: ResNet-50's
    100 MB took 46 ms a walk on the H100's host)."""
    started = time.perf_counter()
    descs: dict = {}
    consts: dict = {}
    alias: dict = {}
    steps: list[Step] = []
    notes: list[str] = []
    # the layers' checks of their built programs (LayerWork.after_build), in node order
    after_build: list[tuple[Node, object]] = []
    inputs: list[tuple[str, TensorKey]] = []
    concats: list[ConcatCandidate] = []       # layers whose output is their inputs end to end
    # output name -> (its Result's place among the model's outputs, the tensor): the outputs
    # come in the model's order, not the order the layers run in
    results: dict[str, tuple[int, TensorKey]] = {}
    booleans: set[str] = set()      # outputs the model declares boolean (Result: boolean=true)
    result_rank = {n.id: i for i, n in enumerate(graph.results)}
    empty: dict[TensorKey, tuple] = {}        # compiled-in values with no element: their shape
    # the model's variables (state_ref key -> TensorDesc) and the layer that first named each;
    # the steps that write one (Assign) run after all others: the run reads what the last left
    check_variables(graph)
    states: dict = {}
    state_owners: dict = {}
    last_steps: list[Step] = []

    for node in order:
        try:
            if node.type == "Parameter":
                dtype = node.outputs[0].dtype if node.outputs else "f32"
                if node.name in input_values:   # compiled in: no input buffer
                    compiled_in((node.id, 0), np.asarray(input_values[node.name]), dtype,
                                 consts, descs, empty)
                else:
                    descs[(node.id, 0)] = TensorDesc(input_shapes[node.name], dtype)
                    inputs.append((node.name, (node.id, 0)))
                    if is_empty(input_shapes[node.name]):   # no element: nothing reads it
                        empty[(node.id, 0)] = tuple(input_shapes[node.name])
                continue
            if node.type == "Const":
                value = np.asarray(node.value)
                compiled_in((node.id, 0), value, value.dtype, consts, descs, empty)
                continue
            if node.id in fusion.absorbed:     # computed by the kernel it was fused into
                owner = (fusion.absorbed[node.id], 0)
                descs[(node.id, 0)] = descs[owner]
                alias[(node.id, 0)] = owner
                if owner in empty:             # no element: as the owner, nothing computes it
                    empty[(node.id, 0)], consts[(node.id, 0)] = empty[owner], consts[owner]
                continue
            in_keys = [graph.producer(node.id, i) for i in range(len(node.inputs))]
            in_descs = [descs[k] for k in in_keys]
            if node.type == "Result":
                name = _output_name(graph, node, in_keys[0], results)
                if name is not None:
                    results[name] = (result_rank[node.id], in_keys[0])
                    if node.attrs.get("boolean") == "true":
                        booleans.add(name)
                continue
            impl = fusion.replaced.get(node.id) or impls[node.id]
            _check_input_count(node, impl)
            call = LayerCall(
                name=node.name, where=node.describe(), type=node.type,
                attrs=impl.parse_attributes(node.attrs, node.name), inputs=in_descs,
                consts={i: consts[k] for i, k in enumerate(in_keys) if k in consts},
                input_names=[_input_names(graph, node, i, k) for i, k in enumerate(in_keys)],
                declared=[(p.shape, p.dtype) for p in node.outputs],
                context=CompileContext(options.device,
                                       custom_input_padding=options.custom_input_padding,
                                       facts=node.facts))
            # half tensors on a device without cl_khr_fp16: the op runs on float copies
            as_float = not options.fp16 and impl.half_as_float and not impl.reads_half and \
                half_storage.touches_half(call)
            out_descs = half_storage.half_outputs(impl, call) if as_float else \
                impl.outputs(call)
            _check_output_count(node, impl, out_descs)
            _check_declared_shapes(node, out_descs)
            _check_fp64(options, node, in_descs + out_descs)
            out_keys = [(node.id, j) for j in range(len(out_descs))]
            settled = settle_empty(node, impl, call, in_keys, out_keys, out_descs, consts,
                                   descs, empty)
            if settled is None:                # zero-size outputs, or known when compiling
                continue
            call, in_keys = settled
            in_descs = call.inputs
            if impl.is_view:                   # output 0 is input 0's buffer, reshaped
                descs[out_keys[0]] = out_descs[0]
                alias[out_keys[0]] = in_keys[0]
                if in_keys[0] in consts:
                    consts[out_keys[0]] = consts[in_keys[0]].reshape(out_descs[0].shape)
                continue
            ep = fusion.epilogues.get(node.id)
            if ep is not None:                 # bias and ReLU computed where it stores
                in_keys, in_descs = _fold_epilogue(node, ep, in_keys, in_descs, out_descs[0],
                                                   consts, descs, impl.epilogue_channels_last,
                                                   folded)
                # the layer sees the folded weights (scaled per channel) and the bias as consts
                call = replace(call, inputs=in_descs,
                               consts={i: consts[k] for i, k in enumerate(in_keys)
                                       if k in consts},
                               context=replace(call.context, epilogue=ep.fused()))
            if options.tuner is not None:
                variant = options.tuner.choose(impl, half_storage.float_call(call),
                                               half_storage.float_descs(out_descs)) \
                    if as_float else options.tuner.choose(impl, call, out_descs)
                if variant is not None:
                    call = replace(call, context=replace(call.context, variant=variant))
            if layers_only and all(d.is_plain for d in out_descs):
                # the tuner's walk: choosing was all, and the layers after read these outputs as
                # they are (a custom layer's other formats are reordered by its work: made then)
                descs.update(zip(out_keys, out_descs))
                continue
            work = half_storage.half_work(impl, call, out_descs) if as_float else \
                impl.work(call, out_descs)
            _check_fp16(options, node, impl, work)
            notes += work.notes
            if work.after_build is not None:
                after_build.append((node, work.after_build))
            register_states(node, work.states, states, state_owners, descs)
            wired = _wire(node, work, in_keys, out_keys, descs, consts)
            if impl.stores_state:          # its output (if any) is the value it stores
                if out_descs:
                    descs[out_keys[0]] = out_descs[0]
                    alias[out_keys[0]] = in_keys[0]
                last_steps.extend(wired)
                continue
            offsets = impl.input_offsets(call, out_descs)
            if offsets is not None and len(wired) == 1:
                concats.append(ConcatCandidate(len(steps), tuple(offsets)))
            steps.extend(wired)
        except CustomLayersError as e:
            _name_the_layer(e, node)
            raise
    if layers_only:
        return None

    steps.extend(last_steps)
    outputs = [(name, key) for name, (_, key) in sorted(results.items(),
                                                        key=lambda item: item[1][0])]
    in_place = place_concat_inputs(steps, concats, descs, alias, consts,
                                   [k for _, k in inputs], [k for _, k in outputs],
                                   options.concat_alignment)
    steps = in_place.steps
    alias.update(in_place.alias)
    laid_out = time.perf_counter()
    memory = plan_memory_of(steps, descs, alias, consts, inputs, outputs, states,
                            largest=engine.device.max_mem_alloc_size)
    device_bytes = check_device_memory(engine.device, steps, descs, consts, alias, inputs,
                                       outputs, memory, states)
    planned = time.perf_counter()
    programs = _build(engine, steps, after_build)
    seconds = {"layers": laid_out - started, "memory": planned - laid_out,
               "programs": time.perf_counter() - planned}
    return CompiledPlan(steps, descs, consts, alias, inputs, outputs, memory, programs,
                        boolean_outputs=frozenset(booleans),
                        notes=notes, offsets=in_place.offsets, in_place=in_place.decisions,
                        seconds=seconds, device_bytes=device_bytes, states=states)


def _output_name(graph: Graph, result: Node, src, taken: dict) -> str | None:
    """The name an output is returned under: the graph's own name for it (an ONNX graph output
    names the Result's input port, also when an Identity or Dropout made it the value of
    another name), else the tensor's first name (an IR producer's port names), else the Result
    layer's name. None for a graph output listed twice (ONNX allows it): it is returned once.
    Two Results of one tensor under one tensor name (an IR) are two outputs: the second takes
    the Result layer's own name. `taken`: name -> (rank, tensor) of the outputs so far."""
    own = result.inputs[0].names if result.inputs else ()
    names = own or graph.nodes[src[0]].outputs[src[1]].names
    name = names[0] if names else result.name
    if name in taken and own:
        if taken[name][1] == src:
            return None
        raise ModelError(f"{result.describe()}: two outputs of the model are named '{name}'")
    if name in taken:
        name = result.name
    if name in taken:
        raise ModelError(f"{result.describe()}: two outputs of the model are named '{name}'")
    return name


def plan_prefix(plan: CompiledPlan, count: int, outputs: list[tuple[str, TensorKey]],
                largest: int | None = None) -> CompiledPlan:
    """The first `count` steps of `plan` as a plan of their own whose outputs are `outputs`
    (tensors those steps compute, or inputs), with its memory planned anew: how a debugging
    run observes what a later layer receives (network_checks.py)."""
    steps = plan.steps[:count]
    memory = plan_memory_of(steps, plan.descs, plan.alias, plan.consts, plan.inputs, outputs,
                            plan.states, largest=largest)
    _, own, shared = plan_buffers(steps, plan.descs, plan.consts, plan.alias, plan.inputs,
                                  outputs, memory, plan.states)
    return CompiledPlan(steps, plan.descs, plan.consts, plan.alias, plan.inputs, outputs,
                        memory, plan.programs[:count], offsets=plan.offsets,
                        in_place=plan.in_place, states=plan.states,
                        device_bytes=(memory.planned_bytes + sum(n for n, _ in own),
                                      sum(n for n, _ in shared)))


def _input_names(graph: Graph, node: Node, i: int, key: TensorKey) -> frozenset[str]:
    """The names input i goes by: its producer's (whole and last path part) and its tensor's."""
    producer = graph.nodes[key[0]]
    return frozenset({producer.name, producer.name.rsplit("/", 1)[-1],
                      *producer.outputs[key[1]].names, *node.inputs[i].names})


def _wire(node: Node, work: LayerWork, in_keys, out_keys, descs, consts) -> list[Step]:
    """The work's stages as plan steps: each stage's tensor references become the plan's keys
    (temporaries and constants of the layer get keys of their own)."""
    keys: dict = {("in", i): k for i, k in enumerate(in_keys)}
    keys.update({("out", j): k for j, k in enumerate(out_keys)})
    for name, desc in work.temps.items():
        keys[("temp", name)] = ("temp", node.id, name)
    for name in work.states:             # the request's own tensor, one key plan-wide
        keys[state_ref(name)] = state_ref(name)
    for name, value in work.consts.items():
        key = keys[("const", name)] = ("const", node.id, name)
        consts[key] = value
        descs[key] = TensorDesc(value.shape, value.dtype)
    steps = []
    for stage in work.stages:
        step = replace(stage, inputs=[keys[r] for r in stage.inputs],
                       outputs=[keys[r] for r in stage.outputs])
        for k, d in zip(step.outputs, step.output_descs):
            descs[k] = d
        steps.append(step)
    return steps


def _fold_epilogue(node, ep, in_keys, in_descs, out_desc, consts, descs,
                   channels_last: bool = False, memo: dict | None = None):
    """Collapse the fused chain into one bias input (and weights scaled per channel). The
    channels are the output's axis 1, or with `channels_last` its last axis from rank 3 on.
    `memo`: node id -> (weights, scale, folded) of an earlier walk, reused for the same
    weights and scale (and filled)."""
    shape = out_desc.shape
    channels = shape[-1] if channels_last and len(shape) >= 3 else shape[1]
    scale, bias = ep.scale_and_bias(channels)
    if ep.has_scale:
        w = np.asarray(consts[in_keys[1]])
        earlier = memo.get(node.id) if memo is not None else None
        if earlier is not None and earlier[0] is w and np.array_equal(earlier[1], scale):
            folded = earlier[2]
        else:
            folded = _scaled(w, scale, lead=2 if node.type == "GroupConvolution" else 1)
            if memo is not None:         # holds `w`: its identity stays its own
                memo[node.id] = (w, scale, folded)
        wkey = ("folded_weights", node.id)
        consts[wkey] = folded
        descs[wkey] = in_descs[1]
        in_keys = [in_keys[0], wkey] + in_keys[2:]
    bkey = ("fused_bias", node.id)
    consts[bkey] = bias.astype(np.float32)
    descs[bkey] = TensorDesc((channels,))
    in_keys, in_descs = in_keys + [bkey], in_descs + [descs[bkey]]
    if ep.residual is not None:          # the other side of a residual Add: the last input
        in_keys, in_descs = in_keys + [ep.residual], in_descs + [descs[ep.residual]]
    return in_keys, in_descs


def _scaled(w: np.ndarray, scale: np.ndarray, lead: int) -> np.ndarray:
    """`w` with output channel o (axis 0 of OIYX, axes 0 and 1 together of GOIYX: the `lead`
    axes) multiplied by scale[o], in float64 and rounded once to float32, as numpy's casting
    loop does it chunk by chunk: no float64 copy of the whole weights."""
    folded = np.empty(w.shape, np.float32)
    np.multiply(w.reshape(w.shape[:lead] + (-1,)), scale.reshape(w.shape[:lead] + (1,)),
                out=folded.reshape(w.shape[:lead] + (-1,)), dtype=np.float64,
                casting="same_kind")
    return folded


def _check_input_count(node: Node, impl: LayerImpl) -> None:
    if impl.input_count is None:
        return
    fewest, most = impl.input_count
    n = len(node.inputs)
    if n < fewest or (most is not None and n > most):
        wanted = (f"{fewest}" if fewest == most else
                  f"{fewest} or more" if most is None else f"{fewest} to {most}")
        raise ModelError(f"{node.describe()}: a {node.type} layer takes {wanted} input"
                         f"{'' if wanted == '1' else 's'}, the model gives it {n}")


def _check_output_count(node: Node, impl: LayerImpl, out_descs: list[TensorDesc]) -> None:
    """A custom node with more outputs than its layer's descriptor has output ports: the model
    and the config disagree (a built-in op may leave optional outputs out; a Python layer says
    it in its own words)."""
    if impl.impl != "custom" or len(node.outputs) <= len(out_descs):
        return
    defined = getattr(impl, "spec", None) or getattr(impl, "layer", None)
    where = f" ({defined.location})" if getattr(defined, "location", None) else ""
    n, k = len(node.outputs), len(out_descs)
    raise ModelError(f"{node.describe()}: the model gives the node {n} outputs, but layer type "
                     f"'{impl.type}'{where} has {k} output port{'' if k == 1 else 's'} "
                     f"(<Tensor type=\"output\">); give the node {k} output"
                     f"{'' if k == 1 else 's'}, or the descriptor a port for each")


def _check_declared_shapes(node: Node, out_descs: list[TensorDesc]) -> None:
    for j, (port, desc) in enumerate(zip(node.outputs, out_descs)):
        declared = port.shape
        if declared is None or any(d is None for d in declared):
            continue
        if tuple(declared) != tuple(desc.shape):
            raise ModelError(f"{node.describe()}: output port {j} is declared as "
                             f"{list(declared)} but the inputs give {list(desc.shape)}")


def _check_fp64(options: PlanOptions, node: Node, descs: Sequence[TensorDesc]) -> None:
    if not options.fp64 and any(d.dtype == "f64" for d in descs):
        raise BindingError(f"{node.describe()}: f64 (double) tensors need a device with "
                           f"cl_khr_fp64; {options.device_name} has none (convert the model "
                           f"to float32)")


def _check_fp16(options: PlanOptions, node: Node, impl: LayerImpl, work: LayerWork) -> None:
    """Kernels on half tensors need cl_khr_fp16 (without it half is a storage type only, and
    the build fails in the compiler's words): say so before anything is built. Built-in ops
    read half through vload_half themselves (impl.reads_half) or run on float copies of half
    tensors (ops/half_storage.py), whose widening and narrowing kernels alone touch half; a
    custom layer's binding says it for its own kernel (registry.check_half_support); views
    and host work have no kernel."""
    if options.fp16:
        return
    stages = [s for s in work.stages
              if s.launches and s.entry not in half_storage.CONVERSION_ENTRIES]
    kernels = [launch for stage in stages for launch in stage.launches]
    uses = [] if impl.reads_half else \
        [d for s in stages for d in (*s.input_descs, *s.output_descs) if d.dtype == "f16"]
    if kernels and (uses or any(_FP16_PRAGMA in k.source for k in kernels)):
        what = "f16 (half) tensors" if uses else "its kernel computes in half, which"
        raise DeviceError(f"{node.describe()}: {what} need the OpenCL extension cl_khr_fp16; "
                          f"{options.device_name} does not have it (convert the model to "
                          f"float32, or run it on a device with fp16)")


# how a built-in op's program enables half arithmetic (ops/_program.py: program_text)
_FP16_PRAGMA = "cl_khr_fp16 : enable"


def _name_the_layer(e: CustomLayersError, node: Node) -> None:
    """Say which layer, unless the error already does; its own fields stay as they are."""
    if e.context is None and f"'{node.name}'" not in str(e):
        e.context = node.describe()


def _build(eng, steps: list[Step], after_build: Sequence[tuple[Node, object]]) -> list:
    """Every step's programs, the custom layers' with the built-ins', built in one parallel
    batch (parallel_build.py); then each layer's checks of its built programs (a custom
    layer's kernel, its build error at the user's file and line), in node order; then a
    build error names the first layer (in order) whose program fails."""
    built = build_programs(eng, build_jobs(steps))
    for node, check in after_build:
        try:
            check(lambda launch: built[(launch.source, launch.options)])
        except CustomLayersError as e:
            _name_the_layer(e, node)
            raise
    for s in steps:
        for launch in s.launches:
            e = built[(launch.source, launch.options)]
            if isinstance(e, CustomLayersError):
                if not e.layer:
                    e.layer = s.name
                raise e
    return [[built[(launch.source, launch.options)] for launch in s.launches] for s in steps]
