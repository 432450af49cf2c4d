"""Network: a graph compiled once for one device, then run many times (clDNN's split).

The network rewrites its graph (passes/: PASSES), asks its resolver what implements every layer
(resolver.py: loaded layers first, then built-ins), plans fusion once for the graph
(passes/fusion.py), finds the inputs compiled in by value, and keeps one compiled plan per set
of input shapes and values of those inputs (plan_keys.py; compiler.py makes the plans: shapes,
fusion, launches, memory, builds). Running is done by InferRequest (request.py), pooled here
per plan.

Thread safety: `infer` and `infer_async` may be called from several threads at once: picking an
idle request and starting it is one step under the network's lock, so no two threads share a
request. A request itself (create_request) belongs to one thread at a time.
"""
from __future__ import annotations

import pickle
import threading
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from ... import settings
from ...errors import DeviceError, ModelError, TensorError, shape_text
from ...graph.fold_eval import FOLD_TYPE
from ...graph.graph import Graph
from ...graph.load import read_model
from ...graph.variables import variables_of
from ...ops.attention.fused import MAX_HEAD
from ...ops.nn.temporal_block import GUARANTEED_LOCAL_BYTES
from ...passes import FOLDING, passes_for
from ...passes.concrete_shapes import with_concrete_shapes
from ...passes.stream.causal_stream import stream_program
from ...passes.fusion import FusionPlan, plan_network_fusion
from ...passes.shape_folding import fold_for_shapes, has_fold_nodes
from ...passes.state import bind_state_inputs
from .compiler import PlanOptions, compile_plan
from ..device.build_workers import close_workers
from ..device.device import Engine
from ..device.limits import device_traits, has_fp16, has_fp64
from ..device.kernel_objects import release_requests
from ..device.sub_buffers import sub_buffer_alignment
from .plan import CompiledPlan
from .plan_keys import (find_value_inputs, has_open_inputs, plan_key, static_input_shapes,
                        value_input_arrays)
from .packaged import LoadedPackage, load_package
from ..package.container import is_package
from ..execute.request import InferRequest
from ..layers.resolver import Resolver
from ..execute.stream import run_stream
from ..streaming.causal_stream import CausalStream
from ..streaming.request_stream import RequestStream
from ..tuning.tuning import Tuner, TuningStats

if TYPE_CHECKING:
    from ..layers.registry import Registry


# said where a pass asked for made nothing: what it takes
TEMPORAL_NOTE = (f"note: fuse_temporal_blocks: the model has no run of TCN temporal blocks "
                 f"(causal conv, ReLU, causal conv, ReLU, residual, Add, ReLU) whose smallest "
                 f"tile fits the {GUARANTEED_LOCAL_BYTES // 1024} KB of local memory every "
                 f"OpenCL device has (wide channels, a long kernel or dilation); nothing fused")
ATTENTION_NOTE = (f"note: fuse_attention: no attention matched (float32, known shapes, a "
                  f"Softmax over the last axis, head size up to {MAX_HEAD}); nothing fused")
# the input lengths at which Network.streaming folds a model's shape arithmetic that reads its
# length (primes: no arithmetic of the model maps one onto the other's results by chance)
STREAM_PROBE_LENGTHS = (4099, 8209)


class Network:
    """A model compiled for a device. `infer` runs it; `create_request` gives parallel requests.

    graph: a Graph (graph/ir.py, graph/onnx/reader.py), an onnx.ModelProto, the path of a
        model file, or of a compiled package (`customlayers compile -o model.clpkg`;
        packaged.py): its plans run as compiled, for the input shapes it was compiled for;
        `registry` then needs only its Python layers (the package says which).
    registry: custom layers (runtime/layers/registry.py); None = built-ins only.
    input_shapes: name -> shape for inputs whose size the model leaves open.
    input_values: name -> array for the value inputs (`value_inputs`: graph inputs a built-in
        op needs as a compile-time constant, such as a Reshape target fed by the caller);
        without them the plans are compiled at the first infer, one per set of values.
    pad_custom_inputs: (lower, upper) B,F,Y,X padding to hand every custom layer's inputs with
        (the contract says kernels must work on padded views; this proves it and is how a
        runtime would give a following convolution its halo).
    resolver: what implements each node (resolver.py); default: the registry's layers, then
        the built-ins.
    tuning: "off" (each layer's heuristic kernel), "fast" (the default: the few best
        candidates timed on the device while compiling) or "full" (every candidate); the
        choices are cached on disk per device (tuning.py). None: CUSTOMLAYERS_TUNING, else
        fast.
    concat_in_place: the layers before a Concat write into its output, and the Concat copies
        nothing, where that is safe (concat_in_place.py); False: every Concat copies.
    fuse_temporal_blocks: runs of TCN temporal blocks become TemporalBlocks layers, one launch
        each (passes/temporal/). None (the default): on a device that is not a CPU, the runs
        whose convolutions are launch-bound there (an H100: the seed's TCN up to batch 32, at
        0.52-0.90x the unfused time; at 64 the fused kernels were 1.25x: passes/__init__.py);
        True: every run; False: none. Needs `fuse`; a package runs as compiled.
    fuse_attention: the MatMul, scale, mask Add, Softmax, MatMul chains of scaled dot-product
        attention become one FusedAttention layer each (passes/attention_folding.py). None (the
        default): on a device that is not a CPU, where it pays (an H100: see the pass); on
        PoCL the unfused layers ran faster (bench/transformers_cpu.py, 2 blocks at batch 1:
        ViT-B/16-sized 39.4 ms, fused 46.2; BERT-base-sized 25.0 and 27.1).
    """

    package: LoadedPackage | None = None    # where the network was loaded from a package

    def __init__(self, graph, registry: Registry | None = None, engine: Engine | None = None, *,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 input_values: Mapping[str, np.ndarray] | None = None,
                 profiling: bool = False, pad_custom_inputs=None, messages=None,
                 fuse: bool = True, resolver: Resolver | None = None,
                 tuning: str | None = None, concat_in_place: bool = True,
                 fuse_temporal_blocks: bool | None = None,
                 fuse_attention: bool | None = None):
        self._say = messages if messages is not None else (lambda m: None)
        _check_argument_types(registry, engine)
        settings.check_switches("Network", ("fuse_attention", "fuse_temporal_blocks"),
                                profiling=profiling, fuse=fuse,
                                concat_in_place=concat_in_place, fuse_attention=fuse_attention,
                                fuse_temporal_blocks=fuse_temporal_blocks)
        if is_package(graph):
            self._from_package(graph, registry, engine, profiling, input_shapes, input_values)
            return
        self.resolver = resolver if resolver is not None else Resolver(registry, say=self._say)
        if not isinstance(graph, Graph):
            # the resolver lists the custom nodes nothing implements before the reader refuses
            # anything, and shapes the others' outputs (graph/custom_shapes.py)
            graph = read_model(graph, custom_shapes=self.resolver)
        self.graph = graph
        # the graph as read, before the rewrites below (they rebuild, never edit): what
        # streaming() converts, whose patterns (a causal Slice, a last-step Gather) the
        # rewrites would have folded away
        self.read_graph = graph
        self.registry = registry
        if engine is None:
            engine = registry.engine if registry is not None else Engine()
        _check_same_device(engine, registry)
        self.engine = engine
        self.profiling = profiling
        self.fuse = fuse                   # graph rewrites and epilogue fusion (passes/)
        self.messages: list[str] = []      # informational messages (overrides, memory plan)
        # the graph rewrites (passes/__init__.py) asked for, in their order; the shape
        # arithmetic always
        self._fuse_temporal_blocks = fuse_temporal_blocks
        traits = device_traits(engine.device)      # what the passes and the plans choose by
        asked_attention = fuse_attention      # True: asked for, so a note if nothing matches
        if fuse_attention is None:
            fuse_attention = traits.kind != "CPU"
        self._fuse_attention = fuse_attention
        self._concat_in_place = concat_in_place
        # None: a GPU fuses the runs that are launch-bound on it, a CPU none
        launch_bound_on = traits if fuse_temporal_blocks is None and traits.kind != "CPU" \
            else None
        self._passes = passes_for(
            temporal_blocks=bool(fuse_temporal_blocks) or launch_bound_on is not None,
            attention=fuse_attention, launch_bound_on=launch_bound_on) if fuse else FOLDING
        self.graph, self.rewrites = self._rewritten(self.graph, self._passes)
        self.messages += self.rewrites      # one line per rewrite (the CLI's --verbose says them)
        # shape arithmetic that depends on the request's shapes: folded per plan (_compile); so
        # is everything a fusing network decides from shapes where the model leaves an input's
        # dimension open (a torch export's dynamic batch or length): the residual Add and its
        # ReLU read by a convolution, a head's SoftMax in its MatMul, the temporal blocks a GPU
        # fuses where launch-bound. On the declared graph those stayed layers of their own
        # (a TCN with N and T open: 19 layers on PoCL against 10 with them declared)
        self._per_shape = has_fold_nodes(self.graph) or (fuse and has_open_inputs(self.graph))
        # a fusion asked for that finds nothing says so: at load, or where the plans decide it,
        # at the first plan (_graph_for)
        self._pending_notes = [(made, note) for asked, made, note in (
            (fuse_temporal_blocks, "TemporalBlocks", TEMPORAL_NOTE),
            (asked_attention, "FusedAttention", ATTENTION_NOTE)) if fuse and asked]
        if not self._per_shape:
            self._say_unfused(self.graph)
        self._order = self.graph.topological_order()
        self._impls, notes = self.resolver.resolve(
            [n for n in self._order if n.type != FOLD_TYPE])
        self.messages += notes
        self._fusion = self._fusion_plan(self.graph, self._order, self._impls) \
            if not self._per_shape else FusionPlan()
        device = engine.device
        self.tuner = Tuner(engine, settings.tuning_mode(tuning))
        self._options = PlanOptions(traits, device.name.strip(),
                                    has_fp64(device), pad_custom_inputs, tuner=self.tuner,
                                    fp16=has_fp16(device),
                                    concat_alignment=sub_buffer_alignment(engine)
                                    if concat_in_place else 0)
        # graph input name -> the layer input that reads it as a constant (plan_keys.py)
        self.value_inputs = find_value_inputs(self.graph, self._order, self._impls)
        self._plans: dict[tuple, CompiledPlan] = {}
        self._idle_requests: dict[tuple, list] = {}
        self._lock = threading.Lock()      # picking and starting a request is one step
        self._default_key = None
        shapes = static_input_shapes(self.graph, input_shapes or {})
        given_values = input_values or {}
        if shapes is not None and set(self.value_inputs) <= set(given_values):
            values = self._input_values(given_values, shapes)
            self._default_key = plan_key(shapes, values)
            self._plans[self._default_key] = self._compile(shapes, values)

    def _from_package(self, path, registry, engine, profiling, shapes, values) -> None:
        """The network of a compiled package (packaged.py): its plans as the file holds them,
        nothing rewritten, resolved, tuned or compiled; only its input shapes run (`shapes`
        given: the default plan, refused unless compiled)."""
        if engine is None:
            engine = registry.engine if registry is not None else Engine()
        _check_same_device(engine, registry)
        self.engine, self.registry, self.profiling = engine, registry, profiling
        try:
            self.package = load_package(path, engine, registry, self._say)
        finally:
            close_workers()      # an Engine's early start (build_workers.start_early): unused
        self.graph = self.package.graph
        self.resolver, self.tuner, self.fuse = None, None, True
        self.rewrites = []       # made when it was compiled: the package holds the result
        self.messages = [plan.memory.summary() for plan in self.package.plans.values()]
        self.value_inputs = self.package.value_inputs
        self._plans = dict(self.package.plans)
        self._default_key = self.package.default_key
        self._idle_requests = {}
        self._lock = threading.Lock()
        if shapes:
            shapes = {n: tuple(int(d) for d in s) for n, s in shapes.items()}
            self.plan_for(shapes, values)
            self._default_key = plan_key(shapes, self._input_values(values or {}, shapes))

    def __del__(self):
        # the pooled requests' kernels newest first, whatever order a collection takes
        release_requests(r for pool in getattr(self, "_idle_requests", {}).values()
                         for r in pool)

    def _is_builtin(self, node) -> bool:
        return self.resolver.find(node) is self.resolver.builtins.get(node.type)

    def _rewritten(self, graph, passes) -> tuple[Graph, list[str]]:
        messages = []
        for rewrite in passes:
            graph, notes = rewrite(graph, self._is_builtin)
            messages += notes
        return graph, messages

    def _fusion_plan(self, graph, order, impls) -> FusionPlan:
        if not self.fuse:
            return FusionPlan()
        builtins = self.resolver.builtins
        return plan_network_fusion(graph, order, impls, lambda n: not (
            n.id in impls and impls[n.id] is builtins.get(n.type)))

    def _graph_for(self, shapes, values):
        """(graph, order, impls, fusion) a plan for these input shapes (and values of the value
        inputs) compiles: the network's own, or with its shape arithmetic folded for them and
        the other passes run again."""
        if not self._per_shape:
            return self.graph, self._order, self._impls, self._fusion
        graph = fold_for_shapes(self.graph, shapes, values)
        if self.fuse:
            # the ports' shapes for these inputs first: the rewrites fold only what they know
            graph = self._shaped(graph, shapes, values)
            graph, notes = self._rewritten(graph, self._passes[len(FOLDING):])
            self._plan_notes(graph, notes)
        order = graph.topological_order()
        impls, _ = self.resolver.resolve(order)
        return graph, order, impls, self._fusion_plan(graph, order, impls)

    def _shaped(self, graph, shapes, values=None):
        """`graph` (its shape arithmetic folded) with every port's shape set for these input
        shapes, as each node's implementation infers it (passes/concrete_shapes.py)."""
        impls, _ = self.resolver.resolve(graph.topological_order())
        return with_concrete_shapes(graph, lambda n: impls.get(n.id), self._options.device,
                                    shapes, values)

    def _plan_notes(self, graph, rewrites: list[str]) -> None:
        """What a plan's rewrites made that the load's did not (--verbose lists net.rewrites),
        and, at the first plan, the note of a fusion asked for that found nothing."""
        new = [note for note in rewrites if note not in self.rewrites]
        self.rewrites += new
        self.messages += new
        self._say_unfused(graph)

    def _say_unfused(self, graph) -> None:
        """The note of each fusion asked for that `graph` has none of; once (then none)."""
        pending, self._pending_notes = self._pending_notes, []
        for made, note in pending:
            if not any(n.type == made for n in graph.nodes.values()):
                self.messages.append(note)
                self._say(note)

    def _compile(self, shapes, values) -> CompiledPlan:
        graph, order, impls, fusion = self._graph_for(shapes, values)
        folded: dict = {}          # the fused layers' scaled weights, folded in one walk
        if self.tuner is not None:     # every layer's candidates built at once, then timed
            self.tuner.build_ahead(lambda: compile_plan(
                graph, order, impls, fusion, self.engine, self._options, shapes, values,
                layers_only=True, folded=folded))
        try:
            plan = compile_plan(graph, order, impls, fusion, self.engine, self._options,
                                shapes, values, folded=folded)
        finally:
            close_workers()      # their contexts hold device memory the requests may need
        for note in plan.notes:                  # once per plan: a likely misspelled attribute
            self.messages.append(note)
            self._say(note)
        self.messages.append(plan.memory.summary())
        stats = self.tuner.stats
        if stats.layers_timed or stats.from_cache:
            self.messages.append(self.tuner.summary())
            self._say(self.tuner.summary())
            self.tuner.stats = TuningStats()      # one report per compiled plan
        return plan

    def _input_values(self, arrays: Mapping[str, np.ndarray],
                      shapes: Mapping[str, tuple]) -> dict[str, np.ndarray]:
        return value_input_arrays(self.graph, self.value_inputs, arrays, shapes)

    @property
    def input_names(self) -> list[str]:
        return [p.name for p in self.graph.parameters]

    def plan_for(self, shapes: Mapping[str, tuple],
                 values: Mapping[str, np.ndarray] | None = None) -> CompiledPlan:
        """The compiled plan for these concrete input shapes and values of the value inputs
        (compiled on first use)."""
        values = self._input_values(values or {}, shapes)
        key = plan_key(shapes, values)
        plan = self._plans.get(key)
        if plan is None and self.package is not None:
            raise self.package.other_shapes(shapes)
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
                                     f"{shape_text(declared)}")
            plan = self._plans[key] = self._compile(dict(shapes), values)
        return plan

    @property
    def plan(self) -> CompiledPlan:
        if self._default_key is None:
            if self.value_inputs and static_input_shapes(self.graph, {}) is not None:
                raise ModelError(f"the model's input(s) {', '.join(self.value_inputs)} are "
                                 f"compiled in by value: give input_values, or call infer with "
                                 f"arrays (it compiles for their values)")
            raise ModelError("the model has inputs of unknown size: give input_shapes, or call "
                             "infer with arrays (it compiles for their shapes)")
        return self._plans[self._default_key]

    # -- running ---------------------------------------------------------------------------
    def create_request(self, shapes: Mapping[str, tuple] | None = None,
                       values: Mapping[str, np.ndarray] | None = None):
        """A request for the default plan, or for these shapes (and values of the value
        inputs). A request runs its plan's values: inputs of other values need another one."""
        plan = self.plan if shapes is None else self.plan_for(shapes, values)
        return InferRequest(self, plan)

    def _request_for(self, arrays: Mapping[str, np.ndarray]):
        shapes = {n: tuple(a.shape) for n, a in arrays.items()}
        values = self._input_values(arrays, shapes)
        key = plan_key(shapes, values)
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
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
            raise TensorError(f"the inputs are given as {{name: array}}, a list of arrays in "
                              f"input order ({', '.join(names)}), or one array; found "
                              f"{type(inputs).__name__} {shown_value(inputs)}")
        if isinstance(inputs, Mapping):
            unknown = set(inputs) - set(names)
            if unknown:
                raise ModelError(f"input(s) {', '.join(sorted(unknown))} are not inputs of the "
                                 f"model; its inputs: {', '.join(names)}")
            missing = [n for n in names if n not in inputs]
            if missing:
                raise ModelError(f"no value given for input(s) {', '.join(missing)}")
            return self._as_declared({n: _input_array(n, inputs[n]) for n in names})
        inputs = list(inputs)
        if len(inputs) != len(names):
            raise ModelError(f"the model has {len(names)} input(s) ({', '.join(names)}); "
                             f"{len(inputs)} given")
        return self._as_declared({n: _input_array(n, a) for n, a in zip(names, inputs)})

    def _as_declared(self, arrays: dict) -> dict:
        """A bool input (held as u8) given as numbers is true where they are not 0, as a Cast
        to bool: a plain conversion to u8 would make 0.5 false and 256 false."""
        for p in self.graph.parameters:
            a = arrays.get(p.name)
            if a is not None and p.attrs.get("boolean") == "true" and a.dtype != np.bool_:
                arrays[p.name] = (a != 0).astype(np.uint8)
        return arrays

    def infer_async(self, inputs):
        """Start one inference; returns the InferRequest (call .wait() for the outputs).
        Thread-safe: the request is picked and started under the network's lock. An input
        array may be read where it lies until wait() (float32 in the request's layout on a
        CPU device: no copy is made): do not change it before then."""
        arrays = self._named_inputs(inputs)
        with self._lock:
            req = self._request_for(arrays)
            req.start(arrays)
        return req

    def infer(self, inputs) -> dict[str, np.ndarray]:
        """Run once and return {output name: array}. The host waits once, for the outputs.
        A model with state (ReadValue/Assign) runs on an idle request of the pool, each with
        its own state: a sequence runs on one request of create_request."""
        return self.infer_async(inputs).wait()

    def stream(self, inputs: Iterable, nireq: int = 4, *, pinned: bool = False,
               reuse_outputs: bool = False):
        """Run every input of `inputs` (arrays in input order, or dicts by name) with up to
        `nireq` requests in flight, and yield each one's outputs ({name: array}) in input
        order: the next uploads overlap the current compute (runtime/execute/stream.py). The stream
        has requests of its own. Every yielded array is the caller's to keep:
        `list(net.stream(xs))` holds every result.

        pinned: inputs and outputs go through pinned host memory (each output is copied out
        of it before it is yielded).
        reuse_outputs: with pinned, skip that copy: each yielded output is then the request's
        pinned memory, which a later step rewrites; it is valid only until the next one is
        taken (read it at once, or copy what you keep)."""
        for result in run_stream(self, inputs, nireq, pinned=pinned,
                                 reuse_outputs=reuse_outputs):
            yield result.outputs

    def streaming(self, axis: int = -1, batch: int | None = None, *,
                  local_size: int | None = None):
        """The model run one time step at a time (issue 21). A whole-window causal model: a
        CausalStream whose step(frame [N, C_in]) returns each output for that step, from ring
        buffers of every causal convolution's past inputs kept on the device; one kernel
        launch per step. axis: the input's time axis (its last); batch: the number of streams
        N (None: from the first frame). ModelError naming the node when the model cannot
        stream (not causal, or an op that mixes time steps).
        A model that carries its state (ReadValue/Assign, or CausalConvWithState whose
        past_state is an input and present_state an output, bound then to a variable): a
        RequestStream, each step(inputs) one inference on its own request."""
        if getattr(self, "read_graph", None) is None:
            raise ModelError("streaming: a compiled package holds the compiled plans, not the "
                             "model's graph a stream is made from; stream the model file "
                             "itself (Network('model.onnx').streaming())")
        stateful = self._stateful_network()
        if stateful is not None:
            return RequestStream(stateful)
        if has_fold_nodes(self.read_graph):
            program = self._stream_program_at_two_lengths(axis)
        else:
            program = stream_program(self.read_graph, axis=axis, is_builtin=self._is_builtin)
        return CausalStream(self.engine, program, batch, local_size=local_size)

    def _stream_program_at_two_lengths(self, axis: int):
        """The step of a model whose shape arithmetic reads its input's length (a chomp written
        as Slice(ends=Shape(x)[2]), found by a new user's trial: refused as an unknown layer
        before): its arithmetic folded, and every port's shape set, at two lengths
        (STREAM_PROBE_LENGTHS, its other open dims 1), each converted; the two steps must be
        the same (the same ops, frames and weights), or its step depends on the length."""
        graph = self.read_graph
        params = graph.parameters
        if any(p.outputs[0].shape is None for p in params):
            return stream_program(graph, axis=axis, is_builtin=self._is_builtin)
        programs = []
        for length in STREAM_PROBE_LENGTHS:
            shapes = {}
            for p in params:
                dims = p.outputs[0].shape
                time = axis % len(dims) if dims else None
                shapes[p.name] = tuple(length if i == time and d is None else
                                       d if isinstance(d, int) else 1
                                       for i, d in enumerate(dims))
            folded = self._shaped(fold_for_shapes(graph, shapes), shapes)
            programs.append(stream_program(folded, axis=axis, is_builtin=self._is_builtin))
        first, second = (pickle.dumps(p) for p in programs)
        if first != second:
            raise ModelError(f"cannot stream the model '{graph.name}': its shape arithmetic "
                             f"reads the length of its input, and its step at length "
                             f"{STREAM_PROBE_LENGTHS[0]} is not its step at length "
                             f"{STREAM_PROBE_LENGTHS[1]} (a step must not depend on how long "
                             f"the sequence is)")
        return programs[0]

    def _stateful_network(self):
        """This network where the model has variables; a network of the model with its
        CausalConvWithState states bound to variables where it has such pairs; else None."""
        if variables_of(self.graph):
            return self
        bound, notes = bind_state_inputs(self.read_graph, self._is_builtin)
        if bound is self.read_graph:
            return None
        for note in notes:
            self._say(note)
        return Network(bound, self.registry, self.engine, profiling=self.profiling,
                       messages=self._say, fuse=self.fuse, resolver=self.resolver,
                       tuning=self.tuner.mode, concat_in_place=self._concat_in_place,
                       fuse_temporal_blocks=self._fuse_temporal_blocks,
                       fuse_attention=self._fuse_attention)

    @property
    def output_names(self) -> list[str]:
        return [n for n, _ in self.plan.outputs]


def _check_argument_types(registry, engine) -> None:
    """A TypeError saying what Network's registry and engine take (a list of config paths
    passed as the registry was an AttributeError deep in the device check)."""
    from ..layers.registry import Registry
    for name, value, kind, how in (
            ("registry", registry, Registry,
             "a Registry with your configs loaded (reg = Registry(engine); "
             "reg.load('layers.xml')) or None"),
            ("engine", engine, Engine, "an Engine (Engine('GPU'), Engine.from_queue(queue)) "
                                       "or None")):
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"Network(model, registry, engine): {name} is "
                            f"{type(value).__name__}; expected {how}")


def _check_same_device(engine: Engine, registry: Registry | None) -> None:
    """Custom layers are bound (checked against device limits, built) on the registry's engine:
    it must be the network's device and context, or the programs belong to another."""
    other = registry.engine if registry is not None else None
    if other is None or other is engine:
        return
    if other.device != engine.device or other.context != engine.context:
        raise DeviceError(f"the registry's engine runs on '{other.device.name.strip()}' "
                          f"(its own context); the network's engine on "
                          f"'{engine.device.name.strip()}': make the Registry with the "
                          f"network's engine (Registry(Engine.from_queue(queue)))")


def shown_value(value) -> str:
    """A short repr of a wrong argument, for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _input_array(name: str, value) -> np.ndarray:
    """An input value as an array; text or objects are no tensor (np.asarray would make a 0-d
    array of them, refused later for its shape)."""
    array = np.asarray(value)
    if array.dtype.kind in "OSUV":
        raise TensorError(f"input '{name}': expected an array of numbers, found "
                          f"{type(value).__name__} {shown_value(value)}")
    return array
