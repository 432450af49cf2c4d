"""The one interface of every layer implementation: built-in ops (ops/), SimpleGPU layers
(runtime/layers/simplegpu.py) and every later kind implement `LayerImpl`, and the network compiler
treats them alike (the ONNX reference evaluator's OpRun and OpenVINO's op factories play the
same part).

An implementation declares its attributes (`Attr`), answers the output tensors for given input
tensors (`outputs`), and describes its work (`work`): stages of KernelLaunch values over the
layer's inputs, outputs, temporaries and constants of its own, or of HostWork (Python layers).
The compiler hands it a `LayerCall`: what the graph knows of the node, its parsed attributes,
its input tensors, the values of constant inputs, and a CompileContext (the device's traits, a
fused epilogue).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from ..errors import BindingError
from .launch import DEFAULT_CONTEXT, CompileContext, HostWork, KernelLaunch
from .tensor import TensorDesc
from .variant import KernelVariant


@dataclass(frozen=True)
class Attr:
    """A layer attribute: model text -> a Python value with `kind`.

    kind: "int" | "float" | "str" | "bool" | "ints" (comma-separated ints) | "floats".
    """
    name: str
    kind: str
    default: Any = None
    required: bool = False


def parse_attr(attr: Attr, text: str | None, op_type: str, layer: str) -> Any:
    """Attribute text -> value; BindingError naming layer, attribute, expected and found."""
    if text is None:
        if attr.required:
            raise BindingError(f"layer '{layer}' ({op_type}): attribute '{attr.name}' is required")
        return attr.default
    t = text.strip()
    try:
        if attr.kind == "int":
            return int(t)
        if attr.kind == "float":
            return float(t)
        if attr.kind == "bool":
            if t.lower() in ("true", "1"):
                return True
            if t.lower() in ("false", "0"):
                return False
            raise ValueError(t)
        if attr.kind == "ints":
            return tuple(int(v) for v in t.split(",") if v.strip()) if t else ()
        if attr.kind == "floats":
            return tuple(float(v) for v in t.split(",") if v.strip()) if t else ()
        return t
    except ValueError:
        raise BindingError(f"layer '{layer}' ({op_type}): attribute '{attr.name}'='{text}' is not "
                           f"a valid {attr.kind}") from None


class ParsedAttrs(dict):
    """Attribute values by name, and the name of the layer they belong to (for messages)."""

    def __init__(self, values: Mapping[str, Any] = (), layer: str = "?"):
        super().__init__(values)
        self.layer = layer


# A tensor of a stage, relative to its layer: ("in", i) the layer's input i, ("out", j) its
# output j, ("temp", name) a temporary of the layer, ("const", name) one of LayerWork.consts,
# ("state", variable) a state of LayerWork.states (state_ref).
TensorRef = tuple


def state_ref(variable: str) -> TensorRef:
    """The tensor of a model's state (a variable of OpenVINO's ReadValue/Assign): owned by the
    request, alive on the device across its runs, outside the memory plan. The same tuple is
    the state's key in a compiled plan."""
    return ("state", variable)


@dataclass
class Stage:
    """One step of a layer as the executor runs it (a layer, or a reorder around it)."""
    name: str
    type: str
    impl: str                          # "built-in" | "custom" | "reorder" | "python" (profiles)
    entry: str                         # the kernel entries, for profiles
    launches: list[KernelLaunch]       # empty for a host stage
    inputs: list[TensorRef]            # Arg.input(i) -> inputs[i]
    outputs: list[TensorRef]           # Arg.output(i) -> outputs[i]
    input_descs: list[TensorDesc]
    output_descs: list[TensorDesc]
    # work done on the host instead of kernels (a Python layer): reads `inputs`, fills `outputs`
    host: HostWork | None = None


@dataclass
class LayerWork:
    """What a layer does: its stages in order, the temporaries between them, and constants of
    its own (folded weights, per-channel scales)."""
    stages: list[Stage]
    temps: dict[Hashable, TensorDesc] = field(default_factory=dict)
    consts: dict[Hashable, np.ndarray] = field(default_factory=dict)
    # the states its stages read or write (state_ref(variable)), variable -> the tensor: every
    # layer naming one variable must agree on it (the compiler checks)
    states: dict[str, TensorDesc] = field(default_factory=dict)
    # what the user should hear about, though nothing failed (a likely misspelled attribute)
    notes: list[str] = field(default_factory=list)
    # the layer's checks of its built programs (a custom layer's kernel: its entry, arguments,
    # work-group size), run once the compiler has built every program of the network in one
    # batch: called with `program_of(launch)`, the built program of one of the work's launches
    # or the CustomLayersError its build raised; raises what it finds, in the layer's words
    after_build: Callable[[Callable[[KernelLaunch], Any]], None] | None = None


@dataclass
class LayerCall:
    """What the compiler knows of one node when it asks the node's implementation."""
    name: str                                   # the node's name in the model
    where: str                                  # the node described for messages
    type: str                                   # the node's type
    attrs: ParsedAttrs                          # parse_attributes() of the node's attributes
    inputs: Sequence[TensorDesc]
    consts: Mapping[int, np.ndarray]            # values of the constant inputs
    # per input: the names its producer and tensor go by (Data blobs bind by name)
    input_names: Sequence[frozenset[str]] = ()
    # per output port: (shape, dtype) as the model declares them; None where it does not
    declared: Sequence[tuple[tuple | None, str | None]] = ()
    context: CompileContext = DEFAULT_CONTEXT

    def split_blobs(self, blob_names: Sequence[str], port_count: int | None = None
                    ) -> tuple[list[int], dict[str, np.ndarray]]:
        """(the input index of each real port, the constant blobs by name). A blob (SimpleGPU's
        and MVCL's Data) binds to a constant input of the node
          1. by name: its producer or tensor goes by the blob's name, as a whole or as its last
             path part (`weights`, or `conv1/weights` for one node's own);
          2. else by position, when `port_count` (the real inputs the layer binds) is given:
             the constant inputs after the first `port_count` others take the blobs still
             unbound, in the order of `blob_names`. ONNX initializer names are global, so two
             nodes of one type can each have their own blobs only this way (or by path).
        The other inputs are ports 0, 1, ... in order."""
        order = list(dict.fromkeys(blob_names))
        wanted = set(order)
        rest: list[int] = []
        blobs: dict[str, np.ndarray] = {}
        for i in range(len(self.inputs)):
            names = self.input_names[i] if i < len(self.input_names) else frozenset()
            match = sorted((wanted - set(blobs)) & names)
            if i in self.consts and match:
                blobs[match[0]] = self.consts[i]
            else:
                rest.append(i)
        if port_count is None:
            return rest, blobs
        ports = rest[:port_count]
        unbound = [n for n in order if n not in blobs]
        for i in rest[port_count:]:
            if i in self.consts and unbound:
                blobs[unbound.pop(0)] = self.consts[i]
            else:
                ports.append(i)
        return ports, blobs


class LayerImpl:
    """Base of every layer implementation; see the module docstring."""
    type: str = ""
    impl: str = "built-in"
    attributes: tuple[Attr, ...] = ()
    # inputs whose values must be constants known at compile time (e.g. Reshape's target shape)
    const_inputs: tuple[int, ...] = ()
    # True when output 0 is input 0's buffer under another shape (Reshape, Squeeze, ...): no work
    is_view: bool = False
    # True when the layer can apply a per-channel bias and a ReLU where it stores (FusedEpilogue)
    accepts_epilogue: bool = False
    # True when a fused per-channel scale may be folded into input 1, the constant weights with
    # the output channel on axis 0 (OIYX; GOIYX: axes 0 and 1): the convolutions
    folds_scale: bool = False
    # True when the layer can also finish each row of its output with a SoftMax or LogSoftmax
    # of the last axis after the epilogue (FusedEpilogue.row_softmax): MatMul, a classifier's
    # head
    accepts_row_softmax: bool = False
    # True when the epilogue's channels are the output's last axis once the output has rank 3
    # or more (a Linear layer's bias: MatMul), not axis 1 (a convolution's channels)
    epilogue_channels_last: bool = False
    # True when the fused residual may broadcast to the output (numpy rules: an attention's
    # mask [B, H, 1, S] added to its scores [B, H, S, S]): MatMul, where no folded layer moves
    # its output (passes/fusion.py checks)
    accepts_broadcast_residual: bool = False
    # (fewest, most) inputs the layer takes (most None: any number); None: not declared. The
    # compiler checks it before anything indexes the inputs.
    input_count: tuple[int, int | None] | None = None
    # True when, on a device without cl_khr_fp16, the compiler may run the layer on float32
    # copies of its half tensors (ops/half_storage.py): the built-in ops. A custom layer's
    # kernel is given half as the contract says, and needs the extension
    half_as_float: bool = False
    # True when the layer's kernels read and write half tensors themselves, as float through
    # vload_half/vstore_half on any device (ops/_half_io.py): no float copies
    reads_half: bool = False
    # True when an input with no element adds nothing to the outputs and is dropped before the
    # layer is compiled (Concat: an empty part); see empty_input_outputs for the others
    skips_empty_inputs: bool = False
    # True when the layer writes a state (an Assign): the run's readers of that state must see
    # what the previous run left, so the compiler puts its steps after every other step; its
    # output 0, where the node has one, is its input 0's tensor (what it stores)
    stores_state: bool = False

    def empty_input_outputs(self, call: LayerCall,
                            outputs: Sequence[TensorDesc]) -> list[np.ndarray] | None:
        """The outputs' values when an input read as data has no element and the outputs have
        some: known when compiling, without a kernel (a Reduce over an empty axis gives the
        reduction's identity). None: the layer does not take an empty input (the compiler
        refuses it naming the layer; runtime/compile/compiled_values.py)."""
        return None

    def parse_attributes(self, raw: Mapping[str, str], layer: str) -> ParsedAttrs:
        return ParsedAttrs({a.name: parse_attr(a, raw.get(a.name), self.type, layer)
                            for a in self.attributes}, layer)

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        """The output tensors for the call's inputs."""
        raise NotImplementedError

    def work(self, call: LayerCall, outputs: Sequence[TensorDesc]) -> LayerWork:
        """The stages that compute `outputs` (from `outputs()`) from the call's inputs."""
        raise NotImplementedError

    def input_offsets(self, call: LayerCall, outputs: Sequence[TensorDesc]) -> list[int] | None:
        """When output 0 is nothing but the inputs laid end to end in memory (each input one
        contiguous range of it, bytes unchanged: a Concat whose axis has only dims of 1 before
        it), the byte offset of each input in output 0; else None. The network compiler may
        then have the inputs' producers write there and run none of this layer's kernels
        (runtime/compile/concat_in_place.py)."""
        return None

    def variants(self, call: LayerCall,
                 outputs: Sequence[TensorDesc]) -> tuple[KernelVariant, ...]:
        """The kernel variants this call can run (jit/variant.py; every one computes the same
        result to fp32 rounding), the heuristic's best first; `work` runs the one in
        `call.context.variant` (None: the first). Fewer than two: nothing to choose, and the
        tuner (runtime/tuning/tuning.py) times nothing."""
        return ()
