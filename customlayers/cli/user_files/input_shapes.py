"""The input shapes of `run` and `benchmark`: parsed from the command line, and checked against
the model's declared input shapes before anything is compiled.

Two spellings: ours, `--shape NAME=1x3x224x224` (repeatable), and OpenVINO benchmark_app's,
`-shape` / `-data_shape` `NAME[1,3,224,224],OTHER[1,4]` or `[1,3,224,224]` for a model with one
input. `-b N` sets the first (batch) dimension of every input.

A shape that disagrees with the model is reported as such ("input 'x' has shape [...]; the
model expects [...]"), as Network.plan_for does, rather than as whatever layer first fails to
compile for it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import UsageError
from ...errors import shape_text

OURS = "NAME=1x3x224x224"
OPENVINOS = "NAME[1,3,224,224],NAME2[1,4] or [1,3,224,224]"
# benchmark_app's list: NAME[dims] entries separated by commas; a name may be empty
_OV_ENTRY = re.compile(r"([^\[\],]*)((?:\[[^\[\]]*\])+)(,|$)")


@dataclass(frozen=True)
class GivenShape:
    shape: tuple[int, ...]
    origin: str          # how the user gave it, for messages: "--shape x=1x3", "-i x.npy"


def _dims(text: str, item: str) -> tuple[int, ...]:
    dims = []
    for part in text:
        part = part.strip()
        if not re.fullmatch(r"\d{1,12}", part) or int(part) < 1:
            raise UsageError(f"shape {item!r}: dimension {part!r} is not a positive number (an "
                             f"open dimension such as ?, -1 or 1..8 takes its size from the data: "
                             f"give the size to run with)")
        dims.append(int(part))
    return tuple(dims)


def _parse_ours(item: str) -> tuple[str, tuple[int, ...]]:
    name, sep, text = item.rpartition("=")
    if not sep or not name:
        raise UsageError(f"--shape {item!r} is not {OURS} (or benchmark_app's {OPENVINOS})")
    return name, _dims(text.lower().split("x"), item)


def _parse_openvinos(item: str) -> list[tuple[str, tuple[int, ...]]]:
    found, pos = [], 0
    while pos < len(item):
        m = _OV_ENTRY.match(item, pos)
        if m is None or (m.group(3) == "," and m.end() == len(item)):
            raise UsageError(f"shape {item!r} is not {OPENVINOS} (or {OURS})")
        name, brackets = m.group(1).strip(), m.group(2)
        if brackets.count("[") > 1:
            raise UsageError(f"shape {item!r}: {name or 'an input'} has several shapes "
                             f"{brackets}; a run takes one shape per input (run once per shape)")
        found.append((name, _dims(brackets[1:-1].split(","), item)))
        pos = m.end()
    return found


def parse_shapes(items, input_names: list[str]) -> dict[str, GivenShape]:
    """{input name: GivenShape} from the -shape/-data_shape/--shape items, in either spelling."""
    shapes: dict[str, GivenShape] = {}
    for item in items or ():
        entries = _parse_openvinos(item) if "[" in item else [_parse_ours(item)]
        for name, dims in entries:
            if not name:
                if len(input_names) != 1:
                    raise UsageError(f"shape {item!r} names no input, and the model has "
                                     f"{len(input_names)}: {', '.join(input_names)}; write "
                                     f"NAME{list(dims)}".replace(" ", ""))
                name = input_names[0]
            if name not in input_names:
                raise UsageError(f"shape {item!r}: '{name}' is not an input of the model; its "
                                 f"inputs: {', '.join(input_names)}")
            shapes[name] = GivenShape(dims, f"shape {item!r}")
    return shapes


def apply_batch(shapes: dict[str, GivenShape], batch: int, parameters) -> None:
    """-b N: the first dimension of every input of rank 1 or more becomes N."""
    for p in parameters:
        given = shapes.get(p.name)
        base = given.shape if given else declared_shape(p)
        if base is None or len(base) == 0 or any(d is None for d in base[1:]):
            continue      # unknown rank, a scalar, or open sizes the run still needs given
        if given and given.shape[0] != batch:
            raise UsageError(f"-b {batch} and {given.origin} disagree on the batch of input "
                             f"'{p.name}' ({given.shape[0]})")
        origin = given.origin if given else f"-b {batch}"
        shapes[p.name] = GivenShape((batch,) + tuple(base[1:]), origin)


def declared_shape(parameter):
    """The model's shape of an input (None entries are open), or None for an unknown rank."""
    return parameter.outputs[0].shape if parameter.outputs else None


def check_against_model(shapes: dict[str, GivenShape], parameters) -> None:
    """Each given shape has the declared rank and every declared (static) size."""
    for p in parameters:
        given = shapes.get(p.name)
        declared = declared_shape(p)
        if given is None or declared is None:     # an ONNX input of unknown rank takes any
            continue
        got = given.shape
        if len(got) != len(declared) or any(d is not None and int(d) != g
                                            for d, g in zip(declared, got)):
            raise UsageError(f"input '{p.name}' has shape {list(got)} ({given.origin}); the "
                             f"model expects {shape_text(declared)}")
