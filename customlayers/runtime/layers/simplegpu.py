"""The SimpleGPU adapter: a loaded descriptor (LayerSpec) as a layer implementation
(jit.layer.LayerImpl), so the network compiler runs custom layers exactly like built-ins.

Its work is three kinds of stage: reorders of its inputs into the formats (and padding) its
Tensors ask for, the kernel (Registry.prepare, the first half of the one layer-compile pipeline;
the compiler builds it with the network's other programs and the work's after_build runs
Registry.finish on it), and reorders of its outputs back to dense BFYX (what the rest of the
graph reads). Real inputs bind by port; Data blobs to the layer's constant inputs, by name or by
position (LayerCall.split_blobs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

from ...config.simplegpu.params import unused_params
from ...config.simplegpu.spec import LayerSpec
from ...dtypes import CUSTOM_LAYER_DTYPES
from ...errors import BindingError, ModelError
from ...jit.bindings import in_format, output_shape_from_formula
from ...jit.launch import KernelLaunch
from ...jit.layer import LayerCall, LayerImpl, LayerWork, ParsedAttrs, Stage
from ...jit.tensor import TensorDesc
from ...jit.variant import KernelVariant
from ...ops.reorder import reorder_launch

if TYPE_CHECKING:
    from .registry import Registry


# work-group sizes (along dimension 0) the tuner tries for a layer that leaves local open
LOCAL_SIZES = (64, 128, 256)


@dataclass(frozen=True)
class LocalSizeVariant(KernelVariant):
    """The bound kernel (its plan: the KernelLaunch of a descriptor that leaves the local size
    open) under work-group `local` (None: the driver's choice)."""
    local: tuple[int, ...] | None = None

    @property
    def name(self) -> str:
        return "driver" if self.local is None else "local" + "x".join(map(str, self.local))

    def applies(self, plan: KernelLaunch) -> bool:
        return plan.local_size is None

    def launches(self, plan: KernelLaunch) -> list[KernelLaunch]:
        if self.local is None:
            return [plan]
        return [replace(plan, local_size=self.local, label=f"{plan.label}_{self.name}")]


class SimpleGpuLayer(LayerImpl):
    impl = "custom"

    def __init__(self, spec: LayerSpec, registry: Registry):
        self.spec = spec
        self.type = spec.name
        # asked for two things only: prepare the kernel for a call, finish it once built
        self.registry = registry

    def parse_attributes(self, raw, layer) -> ParsedAttrs:
        # the contract passes attribute text exactly as the model wrote it (SPEC section 3)
        return ParsedAttrs(raw, layer)

    # -- the layer interface ---------------------------------------------------------------
    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        """Declared in the model, else the descriptor's shape formula, else input 0's shape;
        in the Tensor's format (ANY: input 0's as the kernel receives it)."""
        _, kernel_descs, _ = self._kernel_inputs(call)
        out_descs = []
        for binding in self.spec.outputs:
            declared = call.declared[binding.port_index] \
                if binding.port_index < len(call.declared) else (None, None)
            shape = output_shape(call, self.spec, binding, declared[0], kernel_descs)
            fmt = binding.format if binding.format != "ANY" else kernel_descs[0].format
            dtype = declared[1] or kernel_descs[0].dtype
            out_descs.append(TensorDesc(shape, dtype, fmt))
        return out_descs

    def work(self, call: LayerCall, outputs: Sequence[TensorDesc]) -> LayerWork:
        ports, kernel_descs, data = self._kernel_inputs(call)
        stages: list[Stage] = []
        temps: dict = {}
        kernel_refs = []
        for port, i in enumerate(ports):
            desc, want = call.inputs[i], kernel_descs[port]
            if want != desc:
                ref = ("temp", ("in", port))
                temps[ref[1]] = want
                stages.append(Stage(f"{call.name}/reorder_in{port}", "Reorder", "reorder",
                                    "reorder", [reorder_launch(desc, want)], [("in", i)], [ref],
                                    [desc], [want]))
                kernel_refs.append(ref)
            else:
                kernel_refs.append(("in", i))
        # prepared only: the compiler builds the program with every other of the network, in
        # one parallel batch, and then calls after_build (Registry.finish) with it
        prepared = self.registry.prepare(self.spec.name, kernel_descs, outputs,
                                         params=call.attrs, strict_params=False, data=data)
        launch = built_launch = prepared.launch()
        variant = call.context.variant      # the tuner's choice for an open local size
        if variant is not None and prepared.local_size is None and variant.applies(launch):
            (launch,) = variant.launches(launch)
        out_refs, after = [], []
        for j, d in enumerate(outputs):
            if d.is_plain:
                out_refs.append(("out", j))
                continue
            ref = ("temp", ("out", j))
            temps[ref[1]] = d
            out_refs.append(ref)
            after.append(Stage(f"{call.name}/reorder_out{j}", "Reorder", "reorder", "reorder",
                               [reorder_launch(d, d.plain())], [ref], [("out", j)], [d],
                               [d.plain()]))
        stages.append(Stage(call.name, call.type, self.impl, self.spec.entry, [launch],
                            kernel_refs, out_refs, kernel_descs, list(outputs)))
        registry = self.registry
        return LayerWork(stages + after, temps, notes=self._misspelled(call),
                         after_build=lambda program_of: registry.finish(
                             prepared, program_of(built_launch)))

    def _misspelled(self, call: LayerCall) -> list[str]:
        """A model attribute the descriptor does not read, close to one it does read but that
        the model does not give: most likely a typo, and the layer runs with the default."""
        given = set(call.attrs)
        notes = []
        for name, near in unused_params(self.spec, call.attrs):
            missing = [n for n in near if n not in given]
            if missing:
                # at the Define that reads it (the <CustomLayer> line said nothing of where)
                where = next((d.location for d in self.spec.defines if d.param == missing[0]),
                             self.spec.location)
                notes.append(f"warning: {call.where}: attribute '{name}' is not read by layer "
                             f"'{self.spec.name}', whose <Define> at {where} reads "
                             f"'{missing[0]}' (not given: its default is used); did you mean "
                             f"'{missing[0]}'?")
        return notes

    def variants(self, call: LayerCall,
                 outputs: Sequence[TensorDesc]) -> tuple[LocalSizeVariant, ...]:
        """When the descriptor leaves the local size open: the driver's choice, then work-groups
        of up to 64, 128 and 256 items that divide the global size (the kernel may not guard a
        partial group), filled along dimension 0 first, that the device allows. A local size
        the descriptor gives is kept as written: no variants. Nothing is built here (the
        network builds its programs in one batch); a compiled kernel that allows fewer items
        than the device fails to launch when the tuner times it, which drops that variant."""
        ports, kernel_descs, data = self._kernel_inputs(call)
        prepared = self.registry.prepare(self.spec.name, kernel_descs, outputs,
                                         params=call.attrs, strict_params=False, data=data)
        if prepared.local_size is not None:
            return ()
        device = call.context.device
        limit = device.max_work_group_size if device is not None else max(LOCAL_SIZES)
        shapes = []
        for total in LOCAL_SIZES:
            if total > limit:
                continue
            shape, left = [], total
            for g in prepared.global_size:
                shape.append(math.gcd(g, left))
                left //= shape[-1]
            if math.prod(shape) >= 32 and shape not in shapes:
                shapes.append(shape)
        return (LocalSizeVariant(),) + tuple(LocalSizeVariant(tuple(s)) for s in shapes) \
            if shapes else ()

    # -- binding ---------------------------------------------------------------------------
    def _kernel_inputs(self, call: LayerCall):
        """(the call's input index of each real port, the tensors the kernel receives for
        them, the Data blobs by name): real inputs by port, Data blobs from constant inputs
        by name or position (LayerCall.split_blobs)."""
        spec = self.spec
        for i, d in enumerate(call.inputs):
            if d.dtype not in CUSTOM_LAYER_DTYPES:   # the contract's <T>_TYPE list has no double
                raise BindingError(f"{call.where}: input {i} is {d.dtype}; a custom layer "
                                   f"takes {', '.join(CUSTOM_LAYER_DTYPES)}")
        data_names = [d.name for d in spec.data_in_arg_order]
        ports, data = call.split_blobs(data_names, spec.num_input_ports)
        missing = [n for n in data_names if n not in data]
        if missing:
            raise BindingError(f"{call.where}: layer type '{spec.name}' ({spec.location}) binds "
                               f"Data {', '.join(missing)}, but the node has no constant input "
                               f"of that name, nor one after its {spec.num_input_ports} real "
                               f"input(s) to take it by position")
        bound_ports = {t.port_index for t in spec.inputs}
        if bound_ports and max(bound_ports) >= len(ports):
            over = max(spec.inputs, key=lambda t: t.port_index)
            raise BindingError(f"{call.where}: layer type '{spec.name}' ({over.location}) "
                               f"binds input port {max(bound_ports)}, but the node has "
                               f"{len(ports)} input(s): bind its ports 0 to {len(ports) - 1} "
                               f"(port-index of each <Tensor type=\"input\">), or give the "
                               f"node the inputs the descriptor reads")
        extra = [i for i in ports[spec.num_input_ports:] if i in call.consts]
        if extra:
            raise BindingError(
                f"{call.where}: the model gives this layer {len(ports)} inputs and layer type "
                f"'{spec.name}' ({spec.location}) binds {spec.num_input_ports} input port(s); "
                f"input(s) {', '.join(map(str, extra))} are constants. A built-in op that a "
                f"custom layer overrides keeps OpenVINO's inputs, some of them attributes as "
                f"constants (ONNX's HardSigmoid reads as x, alpha, beta): bind each in the "
                f"descriptor, as a <Tensor arg-index=\"...\" type=\"input\" port-index=\"...\"/> "
                f"or a <Data name=\"...\"/>")
        by_port = {t.port_index: t for t in spec.inputs}
        padding = call.context.custom_input_padding
        kernel_descs = []
        for port, i in enumerate(ports):
            want = in_format(call.inputs[i], by_port.get(port))
            if padding is not None:
                want = want.with_padding(*padding)
            kernel_descs.append(want)
        return ports, kernel_descs, data


def output_shape(call: LayerCall, spec: LayerSpec, binding, declared_shape,
                 input_descs) -> tuple[int, ...]:
    """A custom layer's output shape (ONNX shape inference cannot know it), in this order:
    the model's declared shape when fully known (IR port dims, ONNX value_info); else the
    descriptor's `shape` formula over the dim tensor; else input 0's shape. The declared dims
    that are known still count: a formula must agree with them, and without a formula a partly
    declared shape (value_info ["N",16,3,4] with a dynamic batch) takes only its open dims from
    input 0."""
    declared = tuple(declared_shape) if declared_shape is not None else None
    if binding.shape:
        # a model may declare the entries a lower-rank input pads (X of [B, F, Y]) as dims of
        # the output (an OpenVINO IR's port [2, 4, 6, 1]): they are kept then
        computed = output_shape_from_formula(
            spec, binding.shape, input_descs, call.attrs,
            declared_rank=len(declared) if declared is not None else None)
        source = f"the descriptor's shape formula '{binding.shape}' ({binding.location})"
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
        fix = "correct the formula or the shape the model declares" if binding.shape else \
            "give its output Tensor a shape formula"
        raise ModelError(f"{call.where}: output port {binding.port_index} is declared as "
                         f"{shown} in the model, but {source} gives {list(computed)}"
                         f"; {fix}")
    return computed
