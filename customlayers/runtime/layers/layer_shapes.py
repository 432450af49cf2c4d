"""A loaded layer's output shapes for a model being read (graph/custom_shapes.py): its own rules,
asked through the same `outputs` a compile asks, with what a model reader knows of the node.

Constants: the node's constant inputs are given as placeholders of their shape (zero-stride
arrays: the rules read no values), so that <Data> blobs bind as they will when the model is
compiled (LayerCall.split_blobs, by name or position) and the other inputs are the real ports.

Symbolic dims (a dynamic batch "N"): a layer's rules take numbers (a Tensor shape formula, input
0's shape, a Python layer's output_shapes). They are asked twice, each unknown dim replaced by a
different prime each time (a symbol that several inputs share gets one value per probe): a dim
that comes back the same from both probes does not depend on the unknown dims; one that comes
back as the same symbol's value in both is that symbol (rule 3, input 0's shape, gives "N"
back); any other is unknown (None), left to the compiler, which shapes every plan from the
input shapes it is given.
"""
from __future__ import annotations

from typing import Collection, Mapping, Sequence

import numpy as np

from ...errors import BindingError, CustomLayersError, ModelError
from ...jit.layer import LayerCall
from ...jit.tensor import TensorDesc


def _primes(start: int, count: int) -> tuple[int, ...]:
    found: list[int] = []
    n = start
    while len(found) < count:
        if all(n % d for d in range(2, int(n ** 0.5) + 1)):
            found.append(n)
        n += 1
    return tuple(found)


# the values of up to 64 distinct unknown dims in each of the two probes (no formula of + - * /
# % maps one probe's primes onto the other's by chance)
PROBES = (_primes(1009, 64), _primes(2003, 64))


def layer_output_shapes(impl, layer_type: str, attrs: Mapping[str, str],
                        input_shapes: Sequence[tuple], input_names: Sequence[str] = (),
                        constant_inputs: Collection[int] = (), output_count: int | None = None,
                        where: str | None = None) -> list[tuple | None]:
    """The output shapes `impl` (a LayerImpl) gives for inputs of these shapes (dims: int, a
    symbolic name, or None); see the module docstring. CustomLayersError when its rules give
    none."""
    symbols: list = []
    for k, shape in enumerate(input_shapes):
        for j, d in enumerate(shape):
            key = d if isinstance(d, str) else (k, j) if d is None else None
            if key is not None and key not in symbols:
                symbols.append(key)
    ask = dict(impl=impl, layer_type=layer_type, attrs=attrs, input_names=input_names,
               constant_inputs=constant_inputs, output_count=output_count,
               where=where or f"a {layer_type} node")
    if not symbols:
        return _static(shapes=input_shapes, **ask)
    if len(symbols) > len(PROBES[0]):
        raise ModelError(f"its inputs have {len(symbols)} unknown dims; the shape rules are "
                         f"asked about {len(PROBES[0])} at most")
    answers = []
    for probe in PROBES:
        values = dict(zip(symbols, probe))
        concrete = [tuple(d if isinstance(d, int) else values[d if isinstance(d, str) else
                                                              (k, j)]
                          for j, d in enumerate(shape))
                    for k, shape in enumerate(input_shapes)]
        try:
            answers.append(_static(shapes=concrete, **ask))
        except BindingError:
            raise                   # the descriptor does not fit the node, whatever the dims
        except CustomLayersError as e:
            shown = ", ".join(f"[{', '.join(str(d) if d is not None else '?' for d in s)}]"
                              for s in input_shapes)
            raise ModelError(f"its inputs have dims the model leaves open ({shown}), and its "
                             f"shape rules fail when they are given, e.g., as "
                             f"{list(values.values())[:4]}: {e.describe()}") from e
    names = {symbol: symbol if isinstance(symbol, str) else None for symbol in symbols}
    by_value = [{v: s for s, v in zip(symbols, probe)} for probe in PROBES]
    return [_combined(a, b, by_value, names) for a, b in zip(*answers)]


def _combined(a: tuple, b: tuple, by_value, names) -> tuple | None:
    """One output's shape from its two probes (see the module docstring)."""
    if len(a) != len(b):
        return None                     # even the rank depends on the open dims
    dims = []
    for x, y in zip(a, b):
        if x == y:
            dims.append(x)
        elif x in by_value[0] and by_value[0][x] == by_value[1].get(y):
            dims.append(names[by_value[0][x]])
        else:
            dims.append(None)
    return tuple(dims)


def _static(impl, layer_type, attrs, shapes, input_names, constant_inputs, output_count,
            where) -> list[tuple]:
    names = list(input_names) + [""] * (len(shapes) - len(input_names))
    call = LayerCall(
        name=layer_type, where=where, type=layer_type,
        attrs=impl.parse_attributes(attrs, layer_type),
        inputs=[TensorDesc(tuple(s)) for s in shapes],
        # the shape of each constant, no values: the rules bind by name and position only
        consts={i: np.broadcast_to(np.zeros((), np.float32), tuple(shapes[i]))
                for i in constant_inputs if i < len(shapes)},
        input_names=[frozenset({n, n.rsplit("/", 1)[-1]}) - {""} for n in names],
        declared=[(None, None)] * output_count if output_count is not None else ())
    try:
        return [tuple(d.shape) for d in impl.outputs(call)]
    except NotImplementedError:
        raise BindingError(f"layer type '{layer_type}' does not say its output shapes") from None
