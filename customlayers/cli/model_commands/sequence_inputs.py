"""`run` on a stateful model (OpenVINO's ReadValue/Assign): the -i files are a sequence of
inferences on one request, its state carried from each to the next.

    run -m model.xml -i a.npy -i b.npy -i c.npy     three steps (a model of one input)
    run -m model.xml -i x=a.npy -i h=b.npy -i x=c.npy -i h=d.npy   two steps of two inputs
    run -m model.xml --stream -i seq.npy            the file's first axis is the steps

Positional files fill the model's inputs in order, then the next step's; a named file is the
next step of its input. Every input given has the same number of steps; an input given no
file takes a seeded random array at each step. A model with no variables runs as it always
has (one inference): its -i files are its inputs.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import UsageError
from ...graph.variables import variables_of
from ..user_files.input_arrays import read_array


def is_stateful(graph) -> bool:
    return bool(variables_of(graph))


def sequence_steps(items, graph, stream: bool, typed) -> list[dict[str, np.ndarray]]:
    """The steps' arrays by input name, from the -i items; `typed(array, path, name)` gives an
    array in the model's element type (model_args.model_typed)."""
    names = [p.name for p in graph.parameters]
    per_input: dict[str, list[tuple[np.ndarray, str]]] = {n: [] for n in names}
    positional = 0
    for item in items or ():
        name, sep, path = item.partition("=")
        if not (sep and name in names):
            if sep and not Path(item).is_file():
                raise UsageError(f"-i {item}: '{name}' is not an input of the model; its "
                                 f"inputs: {', '.join(names)}")
            if not names:
                raise UsageError("the model has no inputs; -i gives none")
            name, path = names[positional % len(names)], item
            positional += 1
        per_input[name].append((read_array(path, f"input '{name}'"), path))
    # each file typed once, before a --stream file is cut into its steps: a conversion is
    # said once for the file, not once per step
    given = {n: [(typed(a, path, n), path) for a, path in files]
             for n, files in per_input.items() if files}
    if stream:
        given = {n: _split_first_axis(n, files) for n, files in given.items()}
    counts = {n: len(files) for n, files in given.items()}
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"'{n}' {c}" for n, c in counts.items())
        raise UsageError(f"the inputs are given different numbers of steps ({shown}); a "
                         f"sequence gives each input one array per step")
    count = next(iter(counts.values()), 1)
    steps = [{n: files[t][0] for n, files in given.items()} for t in range(count)]
    for t, step in enumerate(steps[1:], 1):
        for n, array in step.items():
            first = steps[0][n]
            if array.shape != first.shape:
                raise UsageError(f"input '{n}' step {t} ({given[n][t][1]}) has shape "
                                 f"{list(array.shape)}; step 0 has {list(first.shape)}: every "
                                 f"step of a sequence has the same shapes")
    return steps


def _split_first_axis(name: str, files) -> list[tuple[np.ndarray, str]]:
    if len(files) != 1:
        raise UsageError(f"--stream takes one file per input, its first axis the steps; input "
                         f"'{name}' is given {len(files)}")
    array, path = files[0]
    if array.ndim == 0 or array.shape[0] == 0:
        raise UsageError(f"--stream -i {path}: input '{name}' has shape {list(array.shape)}; "
                         f"expected the steps on its first axis (at least one)")
    return [(array[t], f"{path}[{t}]") for t in range(array.shape[0])]


def stacked(outputs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Every step's outputs, each output's arrays stacked on a new first axis (the steps)."""
    return {name: np.stack([step[name] for step in outputs]) for name in outputs[0]}
