"""A batch of rows (Ray Data's dict of columns) to a model's requests, and the outputs back.

A column holds one row per item: `(N, *item)`, where the model's input is `(batch, *item)`
(a row may also keep the model's leading 1, `(N, 1, *item)`). How the rows are run depends on
the model's batch dimension, the first of every input:

  * dynamic (None, or an input of unknown rank): the whole batch is one request, so a batch of
    any size works (the last, partial one included: one compiled plan per size, cached);
  * fixed at 1: one request per row, several in flight;
  * fixed at B > 1: requests of B rows; the last is padded with zeros and the padding's
    outputs are dropped.

Every output's first dimension must be the batch (its rows are the inputs' rows), or the rows
cannot be told apart: that is an error naming the output. Columns that are not model inputs
(ids, paths) pass through to the output unchanged, so results stay joined to their keys.

Pure numpy: nothing here touches OpenCL or Ray.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import ModelError


@dataclass(frozen=True)
class InputSpec:
    """A model input: its name and declared shape (None for an unknown rank; None entries
    for unknown dimensions)."""
    name: str
    shape: tuple | None

    @property
    def batch(self) -> int | None:
        """The fixed batch size, or None when the first dimension is open."""
        if not self.shape or self.shape[0] is None:
            return None
        return int(self.shape[0])


def model_inputs(graph, compiled: Sequence[Mapping[str, tuple]] = ()) -> list[InputSpec]:
    """The InputSpecs of a Graph's parameters, in input order. `compiled`: the sets of input
    shapes a compiled package holds plans for: a package runs only those, so its inputs take
    the set of the largest batch (rows are cut into requests of that batch, the last padded),
    whatever batch the model itself declares (often an open one)."""
    chosen: Mapping[str, tuple] = {}
    if compiled:
        chosen = max(compiled, key=lambda s: max((v[0] for v in s.values() if len(v)),
                                                 default=0))
    specs = []
    for p in graph.parameters:
        shape = chosen.get(p.name, p.outputs[0].shape if p.outputs else None)
        specs.append(InputSpec(p.name, None if shape is None else tuple(shape)))
    return specs


def split_columns(batch, inputs: Sequence[InputSpec]) -> tuple[dict, dict]:
    """(the model's inputs by name, the other columns) of a batch: a dict of numpy arrays
    (Ray's batch_format="numpy"), or one array for a model with one input. Columns named
    after the inputs feed them; a batch of one column feeds a model of one input whatever
    the column's name (from_numpy calls it "data", read_images "image")."""
    names = [i.name for i in inputs]
    if isinstance(batch, np.ndarray):
        batch = {names[0]: batch} if len(names) == 1 else batch
    if not isinstance(batch, Mapping):
        raise TypeError(f"a batch is a dict of numpy arrays (map_batches(..., "
                        f"batch_format='numpy')) or one numpy array; found "
                        f"{type(batch).__name__}")
    if all(n in batch for n in names):
        feeds = {n: np.asarray(batch[n]) for n in names}
        rest = {k: v for k, v in batch.items() if k not in feeds}
    elif len(names) == 1 and len(batch) == 1:
        feeds, rest = {names[0]: np.asarray(next(iter(batch.values())))}, {}
    else:
        raise ModelError(f"the batch's columns ({', '.join(map(str, batch)) or 'none'}) do not "
                         f"name the model's input(s) {', '.join(names)}; a batch of one column "
                         f"feeds a model of one input")
    rows = {n: len(a) for n, a in feeds.items()}
    if len(set(rows.values())) > 1:
        raise ModelError(f"the input columns have different numbers of rows: "
                         f"{', '.join(f'{n}: {r}' for n, r in rows.items())}")
    return feeds, rest


def _items(column: np.ndarray, spec: InputSpec) -> np.ndarray:
    """The column as (N, *item): rows of one item, or rows that keep the model's leading 1."""
    if spec.shape is None:
        return column
    rank = len(spec.shape)
    row = column.shape[1:]
    if len(row) == rank - 1:
        return column
    if len(row) == rank and row[:1] == (1,):
        return column.reshape(column.shape[:1] + row[1:])
    wanted = ["?" if d is None else d for d in spec.shape]
    raise ModelError(f"column for input '{spec.name}' holds rows of shape {list(row)}; the "
                     f"model's input is {wanted}, so a row is {wanted[1:]} (one item) or "
                     f"{[1] + wanted[1:]}")


@dataclass
class BatchPlan:
    """How one batch is cut into requests (`requests`) and put back together (`join`)."""
    inputs: dict            # name -> (N, *item) array
    rows: int
    step: int | None        # rows per request; None: all in one
    fixed: bool             # requests must have exactly `step` rows (padded)

    @classmethod
    def of(cls, feeds: Mapping[str, np.ndarray], inputs: Sequence[InputSpec]) -> "BatchPlan":
        arrays = {s.name: _items(feeds[s.name], s) for s in inputs}
        batches = {s.name: s.batch for s in inputs}
        if len(set(batches.values())) > 1:
            found = ", ".join(f"{n}: {'open' if b is None else b}" for n, b in batches.items())
            raise ModelError(f"the model's inputs disagree on the batch dimension (their "
                             f"first): {found}")
        batch = next(iter(batches.values()), None)
        rows = len(next(iter(arrays.values()))) if arrays else 0
        return cls(arrays, rows, batch, batch is not None)

    def spans(self) -> list[tuple[int, int]]:
        if self.rows == 0:
            return []
        step = self.step or self.rows
        return [(i, min(i + step, self.rows)) for i in range(0, self.rows, step)]

    def requests(self) -> list[dict]:
        """One {input name: array} per request, in row order."""
        out = []
        for start, stop in self.spans():
            item = {}
            for name, array in self.inputs.items():
                part = array[start:stop]
                if self.fixed and len(part) < self.step:
                    pad = np.zeros((self.step - len(part),) + part.shape[1:], part.dtype)
                    part = np.concatenate([part, pad])
                item[name] = part
            out.append(item)
        return out

    def join(self, results: Sequence[Mapping[str, np.ndarray]],
             passthrough: Mapping[str, np.ndarray] | None = None) -> dict:
        """The requests' outputs as columns of `rows` rows (padding dropped), plus the columns
        that passed through."""
        spans = self.spans()
        if len(results) != len(spans):
            raise ModelError(f"{len(results)} results for {len(spans)} requests")
        columns: dict[str, list] = {}
        for (start, stop), result in zip(spans, results):
            sent = self.step if self.fixed else stop - start
            for name, array in result.items():
                if array.ndim == 0 or array.shape[0] != sent:
                    raise ModelError(f"output '{name}' has shape {list(array.shape)} for a "
                                     f"request of {sent} item(s): its first dimension is not "
                                     f"the batch, so its rows cannot be matched to the inputs'")
                columns.setdefault(name, []).append(array[:stop - start])
        out = {name: np.concatenate(parts) for name, parts in columns.items()}
        for name, value in (passthrough or {}).items():
            if name in out:
                raise ModelError(f"column '{name}' of the batch has the name of an output of "
                                 f"the model; rename the column")
            out[name] = value
        return out
