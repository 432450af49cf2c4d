"""The tensors a custom layer's kernel receives (SPEC sections 2 and 5), decided in one place.

`kernel_tensors` is used by the `jit` command, `validate --compile`, the registry and the network,
so the program a user prints is the program that runs:

  * INPUTk for k < number of input ports: the tensor given for port k;
  * then one INPUTk per Data blob, in arg order: a 1-D plain blob of the blob's element count
    (the 2020 OpenVINO behaviour; whatever shape the blob had);
  * OUTPUTk: the tensor given for output port k; by default the Tensor's `shape` formula over
    the `dim` input's B,F,Y,X (input 0 when `dim` names an output), else input 0's shape, with
    input 0's element type and no padding;
  * every input and output is re-expressed in the format its Tensor asks for; ANY keeps the
    given format (a default output with ANY takes input 0's, as bound).

Pure: no OpenCL. Errors are BindingError (counts, types), FormulaError (the shape formula) and
TensorError (a shape formula that gives a non-positive dim).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ..config.formulas import parse_formula_list
from ..config.simplegpu.spec import LayerSpec, TensorBinding
from ..errors import BindingError, FormulaError, TensorError
from .tensor import TensorDesc
from .worksizes import param_values


def kernel_tensors(spec: LayerSpec, inputs: Sequence[TensorDesc],
                   outputs: Sequence[TensorDesc] | None = None,
                   data: Sequence[TensorDesc] = (), params: Mapping[str, str] | None = None
                   ) -> tuple[list[TensorDesc], list[TensorDesc]]:
    """(INPUT0.. descs: the input ports then the Data blobs, OUTPUT0.. descs) of `spec`.

    `inputs`: one TensorDesc per input port, in port order. `outputs`: one per output port, or
    None for the defaults above. `data`: one TensorDesc per Data blob, in arg order (any shape:
    only the element count and type matter). `params`: the layer's attributes, for shape
    formulas that name them."""
    real = _bound_inputs(spec, inputs)
    blobs = _data_blobs(spec, data)
    return real + blobs, _bound_outputs(spec, real, blobs, outputs, params)


def data_blob(desc: TensorDesc) -> TensorDesc:
    """A Data blob as the kernel sees it: 1-D, plain, its element count and type."""
    return TensorDesc((desc.count,), desc.dtype)


def in_format(desc: TensorDesc, binding: TensorBinding | None) -> TensorDesc:
    """`desc` in the format its Tensor asks for (ANY, or no Tensor: as given)."""
    if binding is None or binding.format in ("ANY", desc.format):
        return desc
    return desc.with_format(binding.format)


def _check_descs(spec: LayerSpec, descs, what: str) -> None:
    for i, desc in enumerate(descs):
        if not isinstance(desc, TensorDesc):
            raise BindingError(f"layer type '{spec.name}': {what} {i} must be a TensorDesc, "
                               f"found {type(desc).__name__}")


def _bound_inputs(spec: LayerSpec, inputs: Sequence[TensorDesc]) -> list[TensorDesc]:
    inputs = list(inputs)
    want = spec.num_input_ports
    if len(inputs) != want:
        raise BindingError(f"layer type '{spec.name}' ({spec.location}) has {want} input "
                           f"port(s), {len(inputs)} tensor(s) were given")
    _check_descs(spec, inputs, "input")
    by_port = {t.port_index: t for t in spec.inputs}
    return [in_format(desc, by_port.get(port)) for port, desc in enumerate(inputs)]


def _data_blobs(spec: LayerSpec, data: Sequence[TensorDesc]) -> list[TensorDesc]:
    data = list(data)
    if len(data) != len(spec.data):
        names = ", ".join(d.name for d in spec.data_in_arg_order)
        raise BindingError(f"layer type '{spec.name}' ({spec.location}) binds {len(spec.data)} "
                           f"Data blob(s) ({names or 'none'}), {len(data)} were given")
    _check_descs(spec, data, "Data blob")
    return [data_blob(d) for d in data]


def _bound_outputs(spec: LayerSpec, real: list[TensorDesc], blobs: list[TensorDesc],
                   outputs: Sequence[TensorDesc] | None,
                   params: Mapping[str, str] | None) -> list[TensorDesc]:
    bindings = {t.port_index: t for t in spec.outputs}
    count = spec.num_output_ports
    if outputs is not None:
        outputs = list(outputs)
        if len(outputs) != count:
            raise BindingError(f"layer type '{spec.name}' ({spec.location}) has {count} output "
                               f"port(s), {len(outputs)} description(s) were given")
        _check_descs(spec, outputs, "output")
        return [in_format(desc, bindings.get(port)) for port, desc in enumerate(outputs)]
    if not real:
        raise BindingError(f"layer type '{spec.name}' has no input to take the output "
                           "description from; give outputs=[TensorDesc(...)]")
    first = real[0]
    result = []
    for port in range(count):
        binding = bindings.get(port)
        fmt = binding.format if binding is not None and binding.format != "ANY" else first.format
        shape = first.shape
        if binding is not None and binding.shape:
            shape = output_shape_from_formula(spec, binding.shape, real + blobs, params)
        result.append(TensorDesc(shape, first.dtype, fmt))
    return result


def _rank_of(formulas, source: TensorDesc, env: Mapping) -> int:
    """How many of a shape formula's entries make the output's dims: all, but for trailing
    entries past the source's rank that read only the dims it lacks and give 1 ("X" of a 3-D
    input [B, F, Y]): those are its B,F,Y,X padding, as OpenVINO's plugin pads every tensor to
    4-D, not a dim of the output. "B,F,Y,X" for an elementwise layer then keeps a 3-D input's
    rank (it made [1, 4, 6, 1], and a Softmax over the last axis after it gave ones); a literal
    "B,F,1,1" still makes a 4-D output."""
    implicit = set("BFYX"[len(source.shape):])
    rank = len(formulas)
    while rank > len(source.shape) and formulas[rank - 1].variables and \
            set(formulas[rank - 1].variables) <= implicit and \
            formulas[rank - 1].evaluate(env) == 1:
        rank -= 1
    return rank


def output_shape_from_formula(spec: LayerSpec, text: str, inputs: Sequence[TensorDesc],
                              params: Mapping[str, str] | None = None,
                              declared_rank: int | None = None) -> tuple[int, ...]:
    """An output Tensor's shape formula list (e.g. "B,F*4,Y/2,X/2", or "Y/stride" naming a
    parameter) over the `dim` input's B,F,Y,X (input 0 when `dim` names the output); without
    the trailing entries that are a lower-rank input's padding (_rank_of), unless the model
    declares the output with as many dims as the formula has entries (`declared_rank`: an IR
    port [2, 4, 6, 1])."""
    kind, index = spec.work_sizes.dim
    source = inputs[index] if kind == "input" and index < len(inputs) else inputs[0]
    values = param_values(spec, params)
    env = {**values, **dict(zip("BFYX", source.dims))}
    try:
        formulas = parse_formula_list(text, max_entries=4, params=spec.formula_params)
        if declared_rank != len(formulas):
            formulas = formulas[:_rank_of(formulas, source, env)]
        shape = tuple(f.evaluate(env) for f in formulas)
    except FormulaError as e:
        e.layer, e.attribute = spec.name, "shape"
        binding = next((t for t in spec.tensors if t.shape == text), None)
        raise e.at(binding.location if binding is not None else None)
    if any(d <= 0 for d in shape):
        named = sorted({n for f in formulas for n in f.variables if n in values})
        with_params = "".join(f", {n}={values[n]}" for n in named)
        why = ("an input dim of 0 (an empty batch or sequence): a custom layer's kernel runs "
               "on tensors with at least one element" if 0 in source.dims else
               "every dim of an output is at least 1: check the formula (its / rounds down)")
        raise TensorError(f"layer type '{spec.name}': output shape formula '{text}' gives "
                          f"{list(shape)} for input dims {list(source.dims)}{with_params}; "
                          f"{why}")
    return shape
