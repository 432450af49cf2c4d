"""Work sizes of a custom layer (SPEC section 4): the WorkSizes formulas evaluated on the DIMS of
the `dim` tensor (and the layer's parameters, where a formula names them), with errors that
name the layer, the attribute, the formula and the values: a parameter that gives no positive
work size (a negative stride) is refused before anything is built or launched."""
from __future__ import annotations

from typing import Mapping, Sequence

from ..config.simplegpu.define_values import numeric_value
from ..config.simplegpu.spec import LayerSpec
from ..errors import FormulaError
from ..config.formulas import MAX_WORK_SIZE, Formula, evaluate_work_sizes, parse_formula_list
from .tensor import TensorDesc

MAX_ENTRIES = 3


def parse_work_size(spec: LayerSpec, attribute: str) -> tuple[Formula, ...] | None:
    """The parsed `global` or `local` formulas of a layer; None when the attribute is absent or
    (for local) empty. FormulaError names the layer and the attribute."""
    texts = spec.work_sizes.global_ if attribute == "global" else spec.work_sizes.local
    if texts is None or (attribute == "local" and not any(t.strip() for t in texts)):
        return None
    try:
        return parse_formula_list(",".join(texts), max_entries=MAX_ENTRIES,
                                  params=spec.formula_params)
    except FormulaError as e:
        e.layer, e.attribute = spec.name, attribute
        raise


def dim_tensor(spec: LayerSpec, inputs: Sequence[TensorDesc],
               outputs: Sequence[TensorDesc]) -> TensorDesc:
    """The tensor whose DIMS the formulas see (`dim="output"` or `"input,N"`)."""
    kind, index = spec.work_sizes.dim
    tensors = outputs if kind == "output" else inputs
    if not 0 <= index < len(tensors):
        raise FormulaError(f"dim=\"{kind},{index}\" names {kind} {index}, but the layer has "
                           f"{len(tensors)} {kind}{'s' if len(tensors) != 1 else ''}",
                           layer=spec.name, attribute="dim")
    return tensors[index]


def param_values(spec: LayerSpec, params: Mapping[str, str] | None) -> dict[str, object]:
    """The value of each parameter a formula may name (LayerSpec.formula_params): the layer's
    attribute, else its Define's default, as a number; text that is none stays text, which a
    formula naming it refuses ("'stride' is 'two', not a number"), and a parameter with neither
    is left out ("'stride' has no value here")."""
    values: dict[str, object] = {}
    for d in spec.defines:
        if d.param not in spec.formula_params or d.param in values:
            continue
        text = (params or {}).get(d.param, d.default)
        if text is not None:
            value = numeric_value(str(text))
            values[d.param] = str(text) if value is None else value
    return values


def compute_work_sizes(spec: LayerSpec, inputs: Sequence[TensorDesc],
                       outputs: Sequence[TensorDesc], params: Mapping[str, str] | None = None
                       ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """(global, local): local is None when the driver chooses. Default global: one dimension,
    the element count of output 0. `params`: the layer's attributes, for formulas that name
    them. A FormulaError is at the <WorkSizes> element (not the layer's line)."""
    try:
        return _work_sizes(spec, inputs, outputs, params)
    except FormulaError as e:
        raise e.at(spec.work_sizes.location)


def _work_sizes(spec, inputs, outputs, params):
    global_f = parse_work_size(spec, "global")
    local_f = parse_work_size(spec, "local")
    if local_f is not None and global_f is not None and len(local_f) != len(global_f):
        raise FormulaError(f"local has {len(local_f)} entries but global has {len(global_f)}",
                           ",".join(spec.work_sizes.local or ()), layer=spec.name,
                           attribute="local")
    if global_f is None:
        if not outputs:
            raise FormulaError("the default global size is the element count of output 0, "
                               "but the layer has no output", layer=spec.name, attribute="global")
        global_size: tuple[int, ...] = (outputs[0].count,)
        if global_size[0] > MAX_WORK_SIZE:
            raise FormulaError(f"the default global size, the element count of output 0 "
                               f"({outputs[0].describe()}), is {global_size[0]}; a work size is "
                               f"at most {MAX_WORK_SIZE} (2**32-1): give WorkSizes global",
                               layer=spec.name, attribute="global")
        if local_f is not None and len(local_f) != 1:
            raise FormulaError(f"local has {len(local_f)} entries but the default global has 1",
                               ",".join(spec.work_sizes.local or ()), layer=spec.name,
                               attribute="local")
    env = None
    if global_f is not None or local_f is not None:
        env = {**param_values(spec, params), **dict(zip("BFYX", dim_tensor(spec, inputs,
                                                                           outputs).dims))}
    if global_f is not None:
        global_size = _evaluate(spec, "global", global_f, env)
    local_size = _evaluate(spec, "local", local_f, env) if local_f is not None else None
    return global_size, local_size


def _evaluate(spec, attribute, formulas, env) -> tuple[int, ...]:
    try:
        return evaluate_work_sizes(formulas, env)
    except FormulaError as e:
        e.layer, e.attribute = spec.name, attribute
        raise
