"""Every built-in op, given inputs of any rank from 0 to 6 and constant inputs of odd values,
answers with its output shapes and launches or refuses with a project error: never a ValueError
of unpacking four dims (SpaceToDepth of a rank-3 input), never an IndexError of a rank-0 input.
Pure Python (shapes and launches are planned without a device); the whole grid takes a second.
The campaign (scripts/fuzz_models.py --arity) probes the same through whole models."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import CustomLayersError
from customlayers.jit.layer import LayerCall
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import OPS

SHAPES = [(), (1,), (2, 3), (1, 2, 4), (1, 2, 4, 4), (1, 2, 4, 4, 3), (1, 2, 1, 3, 1, 2)]
CONSTANTS = [None, np.array(1, np.int64), np.array([0], np.int64), np.array([-1], np.int64),
             np.array([2, 2], np.int64), np.array([10 ** 12], np.int64),
             np.array([1, 2, 4, 4], np.int64), np.array([-5, 7, 0], np.int64),
             np.ones((2, 2), np.float32), np.array([3.5], np.float32),
             np.arange(7, dtype=np.int64), np.ones((2, 2, 1, 1), np.float32),
             np.ones((2, 1, 2, 1, 1), np.float32)]


# a value for each required attribute, by kind; lists of 1, 2 and 3 entries (1-D to 3-D
# windows), so that each rank meets a list that fits it and lists that do not
REQUIRED = {"int": "1", "float": "0.5", "bool": "false", "str": "f32"}


def _attribute_sets(op):
    required = [a for a in op.attributes if a.required]
    for entries in (1, 2, 3):
        raw = {a.name: ",".join(["1"] * entries) if a.kind in ("ints", "floats")
               else REQUIRED[a.kind] for a in required}
        yield op.parse_attributes(raw, "probe")
        if not any(a.kind in ("ints", "floats") for a in required):
            return


def _calls(op_type: str):
    op = OPS[op_type]
    fewest, most = op.input_count or (0, 6)
    for attrs in _attribute_sets(op):
        for count in range(fewest, min(most if most is not None else 6, 5) + 1):
            for shape in SHAPES:
                for const in CONSTANTS:
                    consts = {i: const for i in range(1, count)} if const is not None else {}
                    descs = [TensorDesc(shape)] + [
                        TensorDesc(const.shape, "i64" if const.dtype == np.int64 else "f32")
                        if const is not None else TensorDesc(shape) for _ in range(1, count)]
                    yield LayerCall("probe", "probe", op_type, attrs, descs, consts)


@pytest.mark.parametrize("op_type", sorted(OPS))
def test_an_op_answers_or_refuses_any_rank(op_type):
    op = OPS[op_type]
    for call in _calls(op_type):
        try:
            op.work(call, op.outputs(call))
        except CustomLayersError:
            pass
        except Exception as e:           # noqa: BLE001 - what this test looks for
            shapes = [d.shape for d in call.inputs]
            values = {i: v.tolist() for i, v in call.consts.items()}
            raise AssertionError(f"{op_type} with inputs {shapes} and constants {values}: "
                                 f"{type(e).__name__}: {e}") from e
