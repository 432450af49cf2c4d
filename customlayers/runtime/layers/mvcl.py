"""The MVCL adapter: a loaded VPU-dialect layer (config's MvclLayer) as a layer implementation
(jit.layer.LayerImpl), so the network compiler, memory planner, profiler and requests run it
exactly like a SimpleGPU layer or a built-in.

MVCL kernels get raw pointers and their sizes as Scalars, no pitches: every tensor a kernel sees
is dense in the layout its Tensor declares (FYX is BFYX with B = 1, ...). So the work is:
reorders of the inputs whose layout or padding differs into dense tensors of the declared
layout; one Stage per MVCL stage (the variant `<Where>` picks, built by mvcl_build.py), whose
internal buffers (output_buffer -> input_buffer) are temporaries of the layer that the memory
planner places like any tensor; then reorders of outputs not in dense BFYX back to it (what the
rest of the graph reads).

An MVCL descriptor has no shape formula: output shapes come from the model (IR port dims, ONNX
value_info). A node whose output the model does not describe at all (an ONNX node without
value_info) takes input 0's shape, as a SimpleGPU layer without a formula does.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...jit.mvcl_program import (BlobArg, BufferArg, InputTensorArg,
                                   LocalMemoryArg, OutputTensorArg, ScalarArg, buffer_sizes)
from ...config.mvcl.spec import MvclData, MvclLayer, MvclSpec
from ...dtypes import CUSTOM_LAYER_DTYPES
from ...errors import BindingError, ModelError, shape_text
from ...jit.launch import Arg, KernelLaunch
from ...jit.layer import LayerCall, LayerImpl, LayerWork, ParsedAttrs, Stage
from ...jit.tensor import TensorDesc
from ...ops.reorder import reorder_launch
from .mvcl_build import (PREPARE_CODE, finish_stage, prepare_mvcl, select_stages,
                         stage_label)


def output_layouts(stages: Sequence[MvclSpec]) -> dict[int, str]:
    """Output port -> the layout its Tensor declares (the first stage that writes it decides;
    another stage writing it in another layout is an error: one buffer has one layout)."""
    layouts: dict[int, tuple[str, MvclSpec]] = {}
    for spec in stages:
        for t in spec.tensors("output"):
            first = layouts.setdefault(t.port_index, (t.layout, spec))
            if first[0] != t.layout:
                raise BindingError(f"output {t.port_index} of MVCL layer '{spec.name}' is "
                                   f"written as {first[0]} by stage {first[1].stage} and as "
                                   f"{t.layout} by stage {spec.stage} ({t.location}); give "
                                   f"both the same format")
    return {port: layout for port, (layout, _) in sorted(layouts.items())}


def blob_names(stages: Sequence[MvclSpec]) -> list[str]:
    """The constant blobs (<Data type="data" source=NAME>) the stages bind, in the order they
    first appear (the order in which blobs bound by position take the constant inputs)."""
    return list(dict.fromkeys(p.blob for s in stages for p in s.parameters
                              if isinstance(p, MvclData)))


def input_port_count(stages: Sequence[MvclSpec]) -> int:
    """The real inputs the stages bind: the highest input port + 1."""
    return max((t.port_index for s in stages for t in s.tensors("input")), default=-1) + 1


def dense(desc: TensorDesc, layout: str) -> TensorDesc:
    """`desc` as an MVCL kernel takes it: dense, in `layout` (ANY: the layout it comes in)."""
    return TensorDesc(desc.shape, desc.dtype, desc.format if layout == "ANY" else layout)


def declared_output_shape(call: LayerCall, port: int, input0: TensorDesc) -> tuple[int, ...]:
    """Output `port`'s shape as the model declares it (an MVCL descriptor has no formula).
    Undescribed (None: an ONNX node without value_info): input 0's shape. Partly known
    (dynamic dims): input 0's shape when the known dims agree with it, else an error."""
    if port >= len(call.declared):
        raise ModelError(f"{call.where}: the MVCL layer writes output {port}, but the model "
                         f"gives the node {len(call.declared)} output(s)")
    declared = call.declared[port][0]
    if declared is None:
        return tuple(input0.shape)
    declared = tuple(declared)
    if all(d is not None for d in declared):
        return declared
    guess = tuple(input0.shape)
    if len(declared) == len(guess) and all(d is None or d == g for d, g in zip(declared, guess)):
        return guess
    raise ModelError(f"{call.where}: output {port} is declared as {shape_text(declared)} in "
                     f"the model; an MVCL layer has no shape formula, so the model must give its "
                     f"output shapes (IR port dims, ONNX value_info), and input 0's shape "
                     f"{list(guess)} does not fit this one: declare the output shape in full")


class MvclLayerImpl(LayerImpl):
    impl = "custom"

    def __init__(self, layer: MvclLayer, registry):
        self.layer = layer
        self.type = layer.name
        self.registry = registry          # its engine builds the stages (as SimpleGPU's bind)

    def parse_attributes(self, raw, layer) -> ParsedAttrs:
        # attribute text as the model wrote it: <Where> and Scalars read the text
        return ParsedAttrs(raw, layer)

    # -- the layer interface ---------------------------------------------------------------
    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        """The model's declared shapes (see declared_output_shape), in each output Tensor's
        declared layout (ANY: input 0's), dense; the declared element type, else input 0's."""
        stages = select_stages(self.layer, call.attrs)
        ports, _ = self._ports(call, stages)
        if not ports:
            raise BindingError(f"{call.where}: MVCL layer '{self.layer.name}' needs at least "
                               f"one input that is not a constant blob"
                               ).at(self.layer.location, PREPARE_CODE, self.layer.name)
        input0 = call.inputs[ports[0]]
        descs = []
        for port, layout in output_layouts(stages).items():
            shape = declared_output_shape(call, port, input0)
            dtype = (call.declared[port][1] if port < len(call.declared) else None) \
                or input0.dtype
            descs.append(dense(TensorDesc(shape, dtype, input0.format), layout))
        return descs

    def work(self, call: LayerCall, outputs: Sequence[TensorDesc]) -> LayerWork:
        stages = select_stages(self.layer, call.attrs)
        ports, blobs = self._ports(call, stages)
        real = [call.inputs[i] for i in ports]
        # prepared only: the compiler builds the stages' programs with every other of the
        # network in one parallel batch, then after_build checks each built kernel
        engine = self.registry.engine
        prepared = prepare_mvcl(engine, self.layer, stages, call.attrs, real, outputs)
        wiring = _Wiring(call, ports, blobs, outputs)
        for port, nbytes in buffer_sizes([s.program for s in prepared]).items():
            wiring.add_buffer(port, nbytes)
        several = len(stages) > 1           # profiles name each stage of a multi-stage layer
        kernels = [wiring.stage(s.program, stage_label(self.layer, s.spec, len(stages)),
                                f"{call.name}/stage{s.spec.stage}" if several else call.name)
                   for s in prepared]
        layer = self.layer

        def after_build(program_of) -> None:
            for s, kernel in zip(prepared, kernels):
                finish_stage(engine, layer, s.spec, s.program, program_of(kernel.launches[0]))

        return LayerWork(wiring.before + kernels + wiring.after(), wiring.temps,
                         after_build=after_build)

    # -- inputs ----------------------------------------------------------------------------
    def _ports(self, call: LayerCall, stages) -> tuple[list[int], dict[str, np.ndarray]]:
        """(the call's input index of each real port, the constant blobs by name): blobs bind
        to constant inputs by name or by position, as SimpleGPU's Data (LayerCall.split_blobs);
        the others are ports 0, 1, ... in order."""
        for i, d in enumerate(call.inputs):
            if d.dtype not in CUSTOM_LAYER_DTYPES:
                raise BindingError(f"{call.where}: input {i} is {d.dtype}; an MVCL kernel takes "
                                   f"{', '.join(CUSTOM_LAYER_DTYPES)}")
        wanted = blob_names(stages)
        count = input_port_count(stages)
        ports, blobs = call.split_blobs(wanted, count)
        missing = [n for n in wanted if n not in blobs]
        if missing:
            raise BindingError(f"{call.where}: MVCL layer '{self.layer.name}' binds Data "
                               f"{', '.join(missing)}, but the node has no constant input of "
                               f"that name, nor one after its {count} real input(s) to take it "
                               f"by position"
                               ).at(self.layer.location, PREPARE_CODE, self.layer.name)
        return ports, blobs


class _Wiring:
    """Turns generated MVCL arguments into Stages over the layer's tensor references: inputs
    reordered once per layout, outputs written in their declared layout, buffers as temps."""

    def __init__(self, call: LayerCall, ports, blobs, outputs: Sequence[TensorDesc]):
        self.call = call
        self.ports = ports
        self.blobs = blobs
        self.outputs = list(outputs)
        self.temps: dict = {}
        self.before: list[Stage] = []          # reorders into the kernels' layouts
        self._inputs: dict = {}                # (port, layout) -> (ref, desc)
        self._buffers: dict[int, tuple] = {}   # buffer id -> (ref, desc)
        self._out_refs: dict[int, tuple] = {}

    def add_buffer(self, port: int, nbytes: int) -> None:
        # bytes, as the descriptor's size formula gives them; u8 so the planner sizes it exactly
        name = ("buffer", port)
        self.temps[name] = TensorDesc((max(nbytes, 1),), "u8")
        self._buffers[port] = (("temp", name), self.temps[name])

    def input(self, port: int, layout: str):
        key = (port, layout)
        if key not in self._inputs:
            i = self.ports[port]
            have = self.call.inputs[i]
            want = dense(have, layout)
            if want == have:
                self._inputs[key] = (("in", i), have)
            else:
                name = ("in", port, want.format)
                self.temps[name] = want
                self.before.append(Stage(f"{self.call.name}/reorder_in{port}", "Reorder",
                                         "reorder", "reorder", [reorder_launch(have, want)],
                                         [("in", i)], [("temp", name)], [have], [want]))
                self._inputs[key] = (("temp", name), want)
        return self._inputs[key]

    def output(self, port: int):
        if port not in self._out_refs:
            d = self.outputs[port]
            if d.is_plain:
                self._out_refs[port] = (("out", port), d)
            else:
                self.temps[("out", port)] = d
                self._out_refs[port] = (("temp", ("out", port)), d)
        return self._out_refs[port]

    def after(self) -> list[Stage]:
        """Reorders of outputs not in dense BFYX back to it."""
        return [Stage(f"{self.call.name}/reorder_out{j}", "Reorder", "reorder", "reorder",
                      [reorder_launch(d, d.plain())], [ref], [("out", j)], [d], [d.plain()])
                for j, (ref, d) in sorted(self._out_refs.items()) if ref[0] == "temp"]

    def blob(self, arg: BlobArg) -> np.ndarray:
        value = np.asarray(self.blobs[arg.blob])
        if value.dtype == np.float64:      # numpy's default; kernels take float
            value = value.astype(np.float32)
        if arg.layout in ("ANY", "BFYX") or value.ndim > 4:
            return np.ascontiguousarray(value)
        return TensorDesc(value.shape, value.dtype, arg.layout).pack(value)

    def stage(self, program, label: str, name: str) -> Stage:
        ins, in_descs, outs, out_descs, args = [], [], [], [], []

        def slot(refs, descs, ref, desc) -> int:
            if ref not in refs:
                refs.append(ref)
                descs.append(desc)
            return refs.index(ref)

        for a in program.args:
            if isinstance(a, InputTensorArg):
                args.append(Arg.input(slot(ins, in_descs, *self.input(a.port, a.layout))))
            elif isinstance(a, OutputTensorArg):
                args.append(Arg.output(slot(outs, out_descs, *self.output(a.port))))
            elif isinstance(a, BufferArg):
                ref, desc = self._buffers[a.port]
                args.append(Arg.output(slot(outs, out_descs, ref, desc)) if a.writes
                            else Arg.input(slot(ins, in_descs, ref, desc)))
            elif isinstance(a, BlobArg):
                args.append(Arg.const(self.blob(a)))
            elif isinstance(a, LocalMemoryArg):
                args.append(Arg.local(a.nbytes))
            elif isinstance(a, ScalarArg):
                args.append(Arg.scalar(a.value))
            else:       # a new kind of argument in jit/mvcl_program.py that this adapter lacks
                raise BindingError(f"{self.call.where}: MVCL argument '{a.arg_name}' of kind "
                                   f"{type(a).__name__} is not handled by the runtime")
        launch = KernelLaunch(source=program.text, entry=program.entry, args=tuple(args),
                              global_size=program.global_size, local_size=program.local_size,
                              options=program.options, label=label, line_map=program.line_map)
        return Stage(name, self.call.type, "custom", program.entry, [launch], ins, outs,
                     in_descs, out_descs)
