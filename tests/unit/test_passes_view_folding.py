"""passes/view_folding.py and ops/view_steps.py without a device: chains of re-indexing layers
composed into one view (checked element by element against numpy's copies), and the pass on
graphs built directly: what it folds, what it leaves, which layers it drops."""
import itertools

import numpy as np
import pytest

from customlayers.ops.view_steps import ComposedView, OperandViews, dense_view
from customlayers.ops._program import LinearView
from customlayers.passes.view_folding import fold_views_into_matmuls
from interop_graphs import Builder


def builtin(node):
    return True


def _gathered(view: ComposedView, base: np.ndarray) -> np.ndarray:
    """The elements `view` names in the flat buffer `base`."""
    lin = view.linear()
    if lin is not None:
        idx = np.full(lin.shape, lin.offset)
        for axis, stride in enumerate(lin.strides):
            shape = [1] * len(lin.shape)
            shape[axis] = lin.shape[axis]
            idx = idx + np.arange(lin.shape[axis]).reshape(shape) * stride
        return base[idx]
    # any view: walk every coordinate through its mixed-radix parts
    out = np.empty(view.shape, base.dtype)
    for coord in itertools.product(*(range(d) for d in view.shape)):
        at = view.offset
        for c, parts in zip(coord, view.axes):
            for n, s in reversed(parts):
                at += (c % n) * s
                c //= n
        out[coord] = base[at]
    return out


def test_the_head_split_of_torch_multihead_attention_composes_into_one_view():
    s, b, h, d = 5, 3, 2, 4
    x = np.arange(s * b * 3 * h * d)
    for which in range(3):
        view = dense_view((s, b, 3 * h * d)).reshape((s, b, 3, h * d)) \
            .reshape((1, s, b, 3, h * d)).transpose((3, 1, 2, 0, 4)) \
            .reshape((3, s, b, h * d)).select(0, which).reshape((s, b * h, d))
        assert view.linear() is None          # [S, B*H, d] needs two levels for B*H
        view = view.transpose((1, 0, 2)).reshape((b, h, s, d))
        want = x.reshape(s, b, 3, h * d)[:, :, which].reshape(s, b * h, d) \
            .transpose(1, 0, 2).reshape(b, h, s, d)
        assert view.linear() is not None
        np.testing.assert_array_equal(_gathered(view, x), want)


@pytest.mark.parametrize("seed", range(40))
def test_random_chains_match_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in rng.choice([1, 2, 3, 4, 6], size=rng.integers(2, 5)))
    x = np.arange(int(np.prod(shape)))
    ref, view = x.reshape(shape), dense_view(shape)
    for _ in range(4):
        kind = rng.integers(3)
        if kind == 0:
            order = tuple(int(v) for v in rng.permutation(len(ref.shape)))
            ref, view = ref.transpose(order), view.transpose(order)
        elif kind == 1 and ref.ndim > 1:
            axis = int(rng.integers(ref.ndim))
            index = int(rng.integers(ref.shape[axis]))
            ref, view = np.take(ref, index, axis=axis), view.select(axis, index)
        else:
            flat = [f for f in _factors(ref.size)]
            new = tuple(flat[int(rng.integers(len(flat)))])
            composed = view.reshape(new)
            if composed is None:
                continue              # a split no mixed radix can name: not folded
            ref, view = ref.reshape(new), composed
        assert view.shape == ref.shape
        np.testing.assert_array_equal(_gathered(view, x), ref)


def _factors(n: int):
    """A few factorizations of n as shapes."""
    out = [(n,)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
            out.append((n // a, 1, a))
    return out


def reshaped(view: LinearView, shape):
    composed = ComposedView.of(view).reshape(shape)
    return composed.linear() if composed is not None else None


def test_reshaped_follows_numpys_no_copy_rule():
    v = LinearView.dense((4, 6)).transpose((1, 0))              # [6, 4], strides (1, 6)
    assert reshaped(v, (24,)) is None                           # needs a copy
    assert reshaped(v, (2, 3, 4)) == LinearView((2, 3, 4), (3, 1, 6), 0)
    assert reshaped(v, (6, 1, 4)).strides == (1, 0, 6)


def test_matrix_rows_in_two_levels():
    view = dense_view((3, 5, 8)).transpose((1, 0, 2))           # [5, 3, 8]: rows (5, 3)
    rows, col = view.matrix(15, 8)
    assert rows == ((5, 8), (3, 40)) and col == 1
    assert dense_view((3, 8, 5)).transpose((0, 2, 1)).matrix(15, 8) is None   # columns strided


# -- the pass ------------------------------------------------------------------------------
def _attention(scale_q=0.5, leave_read=False):
    """q, k from one [S, B, 3*H*d] tensor through torch's head split; scores = q @ k^T."""
    s, bsz, h, d = 4, 2, 2, 3
    b = Builder("attn")
    qkv = b.param("qkv", (s, bsz, 3 * h * d))

    def split(which):
        t = b.reshape(qkv, (s, bsz, 3, h * d))
        t = b.op("Transpose", [t, b.const(np.array([2, 0, 1, 3], np.int64))],
                 (3, s, bsz, h * d))
        t = b.op("Gather", [t, b.const(np.array(which, np.int64)),
                            b.const(np.array([0], np.int64))], (s, bsz, h * d),
                 {"batch_dims": "0"}, name=f"pick{which}")
        t = b.reshape(t, (s, bsz * h, d))
        t = b.op("Transpose", [t, b.const(np.array([1, 0, 2], np.int64))], (bsz * h, s, d),
                 name=f"heads{which}")
        return b.reshape(t, (bsz, h, s, d))
    q = b.op("Multiply", [split(0), b.const(np.array([scale_q], np.float32))], (bsz, h, s, d),
             {"auto_broadcast": "numpy"}, name="scale_q")
    k = split(1)
    kt = b.op("Transpose", [k, b.const(np.array([0, 1, 3, 2], np.int64))], (bsz, h, d, s),
              name="kt")
    if leave_read:
        b.result(kt)
    b.result(b.op("MatMul", [q, kt], (bsz, h, s, s),
                  {"transpose_a": "false", "transpose_b": "false"}, name="scores"))
    return b.g


def test_the_attention_chains_fold_into_the_matmul_and_leave_the_graph():
    g = _attention()
    new, notes = fold_views_into_matmuls(g, builtin)
    assert len(notes) == 2 and all("into the reads of MatMul 'scores'" in n for n in notes)
    scores = new.nodes["scores"]
    (fact,) = scores.facts
    assert isinstance(fact, OperandViews) and fact.scale == pytest.approx(0.5)
    assert new.producer("scores", 0) == ("qkv", 0) == new.producer("scores", 1)
    assert {n.type for n in new} == {"Parameter", "MatMul", "Result"}
    # the views name the elements numpy's copies hold
    x = np.arange(4 * 2 * 18)
    ref = x.reshape(4, 2, 3, 6)
    q = ref[:, :, 0].reshape(4, 4, 3).transpose(1, 0, 2).reshape(2, 2, 4, 3)
    k = ref[:, :, 1].reshape(4, 4, 3).transpose(1, 0, 2).reshape(2, 2, 4, 3)
    np.testing.assert_array_equal(_gathered(fact.views[0], x), q)
    np.testing.assert_array_equal(_gathered(fact.views[1], x), k.transpose(0, 1, 3, 2))


def test_a_layer_someone_else_reads_stays():
    new, _ = fold_views_into_matmuls(_attention(leave_read=True), builtin)
    assert "kt" in new.nodes and new.producer("scores", 1) == ("qkv", 0)


def test_custom_layers_and_unreadable_views_are_left_as_written():
    g = _attention()
    assert fold_views_into_matmuls(g, lambda n: n.type != "MatMul") == (g, [])
    # a view with neither matrix axis contiguous: [4, 5] read with strides 30 and 6
    b = Builder("odd")
    x = b.param("x", (4, 5, 6))
    t = b.op("Transpose", [x, b.const(np.array([2, 0, 1], np.int64))], (6, 4, 5))
    t = b.op("Gather", [t, b.const(np.array(1, np.int64)), b.const(np.array([0], np.int64))],
             (4, 5), {"batch_dims": "0"})
    b.result(b.op("MatMul", [t, b.const(np.ones((5, 3), np.float32))], (4, 3),
                  {"transpose_a": "false", "transpose_b": "false"}, name="mm"))
    assert fold_views_into_matmuls(b.g, builtin) == (b.g, [])


def test_a_transpose_after_a_matmul_and_its_bias_becomes_where_it_stores():
    s, bsz, dim = 3, 2, 4
    b = Builder("out")
    x = b.param("x", (s * bsz, dim))
    y = b.op("MatMul", [x, b.const(np.ones((dim, dim), np.float32))], (s * bsz, dim),
             {"transpose_a": "false", "transpose_b": "false"}, name="proj")
    y = b.op("Add", [y, b.const(np.ones(dim, np.float32))], (s * bsz, dim),
             {"auto_broadcast": "numpy"}, name="bias")
    y = b.reshape(y, (s, bsz, dim))
    y = b.op("Transpose", [y, b.const(np.array([1, 0, 2], np.int64))], (bsz, s, dim),
             name="back")
    b.result(b.op("ReLU", [y], (bsz, s, dim), name="act"))
    new, notes = fold_views_into_matmuls(b.g, builtin)
    assert len(notes) == 1 and "Transpose 'back' into where MatMul 'proj' stores" in notes[0]
    proj, bias = new.nodes["proj"], new.nodes["bias"]
    assert proj.outputs[0].shape == (bsz, s, dim) == bias.outputs[0].shape
    assert new.producer("bias", 0) == ("proj", 0) and new.producer("act", 0) == ("bias", 0)
    assert "back" not in new.nodes
    (fact,) = proj.facts
    assert fact.out_shape == (bsz, s, dim) and fact.out.shape == (s * bsz, dim)


def _plans_every_matmul(graph) -> None:
    """MatMul plans each MatMul of `graph` with the facts the pass gave it (a fold it cannot
    read raises BindingError)."""
    from customlayers.jit.launch import CompileContext
    from customlayers.jit.tensor import TensorDesc
    from customlayers.ops import get_op
    op = get_op("MatMul")
    for node in graph:
        if node.type == "MatMul":
            attrs = op.parse_attributes(node.attrs, node.name)
            descs = [TensorDesc(tuple(p.shape)) for p in node.inputs]
            ((shape, _),) = op.infer_shapes(attrs, descs, {}, CompileContext(facts=node.facts))
            assert tuple(shape) == tuple(node.outputs[0].shape)


@pytest.mark.parametrize("b_shape", [(1, 1, 6, 5), (1, 6, 5), (6, 5)])
@pytest.mark.parametrize("order", [(1, 0, 2, 3), (0, 2, 1, 3), (2, 0, 1, 3)])
def test_a_folded_store_follows_the_rows_rule_the_matmul_plans_with(b_shape, order):
    """A B of batch 1 ([1, 1, K, N]) makes the MatMul fold A's batches into its rows as a B
    without batch axes does: an output view folded for batched GEMMs (one stride per batch
    axis) was then stored as rows in two levels, and a Transpose (1, 0, 2, 3) after it (rows
    in three levels) was refused with a BindingError at compile."""
    b = Builder("rows")
    x = b.param("x", (2, 3, 4, 6))
    y = b.op("MatMul", [x, b.const(np.ones(b_shape, np.float32))], (2, 3, 4, 5),
             {"transpose_a": "false", "transpose_b": "false"}, name="mm")
    after = tuple((2, 3, 4, 5)[k] for k in order)
    y = b.op("Transpose", [y, b.const(np.array(order, np.int64))], after, name="t")
    b.result(b.op("ReLU", [y], after, name="act"))
    new, _ = fold_views_into_matmuls(b.g, builtin)
    _plans_every_matmul(new)


def test_a_kernel_define_of_nan_is_nan():
    """ops/_program.defines wrote a NaN as -INFINITY (NaN > 0 is false)."""
    from customlayers.ops._program import defines
    text = defines(A=float("nan"), B=float("inf"), C=float("-inf"), D=-0.5)
    assert "A NAN" in text and "B INFINITY" in text and "C (-INFINITY)" in text
    assert "D (-0.5f)" in text


@pytest.mark.parametrize("factors", [[float("nan")], [float("inf")], [-float("inf")],
                                     [1e30, 1e30]])
def test_a_factor_that_is_not_a_finite_float32_stays_a_layer(factors):
    """x * inf summed is not (x summed) * inf (inf - inf is NaN): such a Multiply is not
    folded into the MatMul's scale, nor Multiplys whose product overflows float32."""
    b = Builder("scale")
    y = b.param("x", (4, 6))
    for k, factor in enumerate(factors):
        y = b.op("Multiply", [y, b.const(np.array(factor, np.float32))], (4, 6),
                 {"auto_broadcast": "numpy"}, name=f"scale{k}")
    b.result(b.op("MatMul", [y, b.param("w", (6, 3))], (4, 3),
                  {"transpose_a": "false", "transpose_b": "false"}, name="mm"))
    assert fold_views_into_matmuls(b.g, builtin) == (b.g, [])


def test_a_second_run_reads_the_operands_as_the_first_run_left_them():
    """Network runs the passes again per set of input shapes, over MatMuls an earlier run gave
    views: the pass judged the folds by the inputs' shapes (the chains' first tensors: here B's
    [6, 5], read as [1, 6, 5]), and folded a store the MatMul cannot write (BindingError)."""
    from dataclasses import replace
    b = Builder("twice")
    x = b.param("x", (6, 4))
    a = b.op("Transpose", [x, b.const(np.array([1, 0], np.int64))], (4, 6), name="ta")
    y = b.op("MatMul", [a, b.param("w", (6, 5))], (1, 4, 5),
             {"transpose_a": "false", "transpose_b": "false"}, name="mm")
    y = b.op("Transpose", [b.reshape(y, (1, 2, 2, 5)), b.const(np.array([0, 2, 1, 3],
                                                                          np.int64))],
             (1, 2, 2, 5), name="t")
    b.result(b.op("ReLU", [b.reshape(y, (1, 4, 5))], (1, 4, 5), name="act"))
    earlier = OperandViews((None, dense_view((6, 5)).reshape((1, 6, 5))), (None, (6, 5)))
    b.g.nodes["mm"] = replace(b.g.nodes["mm"], facts=(earlier,))
    new, _ = fold_views_into_matmuls(b.g, builtin)
    _plans_every_matmul(new)


@pytest.mark.parametrize("order", ["model", "reversed"])
def test_a_chain_folded_into_a_store_is_not_also_folded_into_a_read(order):
    """A single head's split after its projection, Reshape [B, S, 1, d] and Transpose to
    [B, 1, S, d], keeps the last axis: the projection can store through it, and the attention
    MatMul after it could read through it too. Folded both ways the reader read the bias Add's
    new [B, 1, S, d] output as the [B, S, d] it had been (a BindingError at compile for every
    single-head attention); one fold each, whichever comes first, in any node order."""
    bsz, s, d = 2, 5, 4
    b = Builder("one_head")
    x = b.param("x", (bsz, s, d))
    kt = b.param("kt", (bsz, 1, d, s))
    y = b.op("MatMul", [x, b.const(np.ones((d, d), np.float32))], (bsz, s, d),
             {"transpose_a": "false", "transpose_b": "false"}, name="proj")
    y = b.op("Add", [y, b.const(np.ones(d, np.float32))], (bsz, s, d),
             {"auto_broadcast": "numpy"}, name="bias")
    y = b.reshape(y, (bsz, s, 1, d))
    y = b.op("Transpose", [y, b.const(np.array([0, 2, 1, 3], np.int64))], (bsz, 1, s, d),
             name="heads")
    b.result(b.op("MatMul", [y, kt], (bsz, 1, s, s),
                  {"transpose_a": "false", "transpose_b": "false"}, name="scores"))
    graph = b.g
    if order == "reversed":                 # an IR need not list its layers in order
        graph.nodes = dict(reversed(list(graph.nodes.items())))
    new, notes = fold_views_into_matmuls(graph, builtin)
    assert len(notes) == 1
    for node in new:
        fact = next((f for f in node.facts if isinstance(f, OperandViews)), None)
        for port, p in enumerate(node.inputs):
            src, src_port = new.producer(node.id, port)
            made = new.nodes[src].outputs[src_port].shape
            assert tuple(p.shape) == tuple(made), (node.name, port)
            if fact is not None and fact.views[port] is not None:
                assert tuple(fact.sources[port]) == tuple(made), (node.name, port)
    _plans_every_matmul(new)
