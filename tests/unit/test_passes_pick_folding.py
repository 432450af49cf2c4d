"""passes/pick_folding.py on graphs built directly (no device): a Gather of the last time step
whose only reader is a MatMul's A becomes the element the MatMul reads."""
import numpy as np

from customlayers.ops.nn.matmul import PickLast
from customlayers.passes.pick_folding import fold_picks_into_matmuls
from interop_graphs import Builder


def builtin(node):
    return True


def _last_step(index=-1, axis=-1, transpose_a="false", shape=(1, 4, 5)):
    b = Builder("pick")
    x = b.param("x", shape)
    last = b.op("Gather", [x, b.const(np.array(index, np.int64)),
                           b.const(np.array([axis], np.int64))], (1, 4),
                {"batch_dims": "0"}, name="last")
    w = b.const(np.ones((4, 3), np.float32))
    b.result(b.op("MatMul", [last, w], (1, 3),
                  {"transpose_a": transpose_a, "transpose_b": "false"}, name="fc"))
    return b.g


def test_a_last_step_gather_before_a_matmul_is_folded():
    new, notes = fold_picks_into_matmuls(_last_step(), builtin)
    assert notes == ["folded Gather 'last' (index -1 of the last axis) into the reads of "
                     "MatMul 'fc'"]
    fc = new.nodes["fc"]
    assert "last" not in new.nodes and fc.facts == (PickLast(-1),)
    assert new.producer("fc", 0) == ("x", 0) and fc.inputs[0].shape == (1, 4, 5)


def test_a_gather_of_another_axis_a_transposed_a_or_a_custom_matmul_is_left_as_written():
    for g in (_last_step(axis=1), _last_step(transpose_a="true"), _last_step(index=5)):
        assert fold_picks_into_matmuls(g, builtin) == (g, [])
    g = _last_step()
    assert fold_picks_into_matmuls(g, lambda n: n.type != "MatMul") == (g, [])


def test_an_open_batch_or_length_folds_all_the_same():
    """The declared graph of a dynamic model: MatMul resolves the index against each request's
    length (and refuses one out of range there)."""
    for shape in ((None, 4, 5), (1, 4, None), (None, 4, None)):
        new, notes = fold_picks_into_matmuls(_last_step(shape=shape), builtin)
        assert len(notes) == 1 and new.nodes["fc"].facts == (PickLast(-1),), shape
    new, notes = fold_picks_into_matmuls(_last_step(index=7, shape=(None, 4, None)), builtin)
    assert new.nodes["fc"].facts == (PickLast(7),)
