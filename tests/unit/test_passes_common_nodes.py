"""passes/common_nodes.py on graphs built directly: layers that compute the same thing from the
same inputs (through constants of equal value) run once; what must stay itself stays."""
import numpy as np

from customlayers.graph.graph import Node, Port
from customlayers.passes.common_nodes import merge_common_nodes
from interop_graphs import Builder


def builtin(node):
    return True


def _twice(shift_b=1.0, extra_result=False):
    """x -> (Add c1 -> ReLU -> Reshape) and (Add c2 -> ReLU -> Reshape), both into a Multiply:
    the second chain repeats the first when c2 == c1."""
    b = Builder("cse")
    x = b.param("x", (2, 6))
    chains = []
    for shift in (1.0, shift_b):
        y = b.op("Add", [x, b.const(np.float32(shift))], (2, 6), {"auto_broadcast": "numpy"})
        y = b.op("ReLU", [y], (2, 6))
        if extra_result and not chains:
            b.result(y)
        chains.append(b.reshape(y, (3, 4)))
    b.result(b.op("Multiply", chains, (3, 4), {"auto_broadcast": "numpy"}, name="mul"))
    return b.g


def test_a_repeated_chain_runs_once():
    new, notes = merge_common_nodes(_twice(), builtin)
    assert notes == ["merged 1 Add layer(s) that repeat an earlier one's work",
                     "merged 1 ReLU layer(s) that repeat an earlier one's work",
                     "merged 1 Reshape layer(s) that repeat an earlier one's work"]
    assert new.producer("mul", 0) == new.producer("mul", 1)
    assert sum(n.type == "ReLU" for n in new) == 1 and sum(n.type == "Const" for n in new) == 2


def test_different_values_outputs_and_custom_layers_stay():
    for g in (_twice(shift_b=2.0), ):
        assert merge_common_nodes(g, builtin) == (g, [])
    g = _twice()
    new, _ = merge_common_nodes(g, lambda n: n.type != "ReLU")
    assert sum(n.type == "ReLU" for n in new) == 2      # a custom layer may do anything
    new, _ = merge_common_nodes(_twice(extra_result=True), builtin)
    assert sum(n.type == "ReLU" for n in new) == 2      # the first names a network output


def test_state_is_never_merged():
    b = Builder("state")
    for k in range(2):
        b.g.add_node(Node(f"rv{k}", f"rv{k}", "ReadValue", {"variable_id": "v"}, [],
                          [Port((2,), "f32")]))
        b.result((f"rv{k}", (2,)))
    assert merge_common_nodes(b.g, builtin) == (b.g, [])


def _two_adds(first, second, width):
    """x + first and x + second into a Multiply: the second Add repeats the first exactly when
    the two constants are the same bytes of the same type and shape."""
    b = Builder("consts")
    x = b.param("x", (2, width))
    adds = [b.op("Add", [x, b.const(c)], (2, width), {"auto_broadcast": "numpy"})
            for c in (first, second)]
    b.result(b.op("Multiply", adds, (2, width), {"auto_broadcast": "numpy"}, name="mul"))
    return b.g


def _merged(first, second, width=4096):
    new, _ = merge_common_nodes(_two_adds(first, second, width), builtin)
    return new.producer("mul", 0) == new.producer("mul", 1)


def test_equal_constants_merge_by_all_their_bytes_not_by_the_sample_their_key_reads():
    w = np.random.default_rng(3).standard_normal(4096).astype(np.float32)
    assert _merged(w, w.copy())
    other = w.copy()
    other[1] += 1.0          # not among the 64 values the key samples (every 64th)
    assert not _merged(w, other)


def test_constants_equal_as_numbers_but_not_as_bytes_stay_apart():
    zero = np.zeros(4096, np.float32)
    assert not _merged(zero, -zero)                # -0.0 is not 0.0: 1 / x tells them apart
    nan = np.full(4096, np.nan, np.float32)
    assert _merged(nan, nan.copy())                # the same NaN bits: the same value
    assert not _merged(np.float32(1.0), np.ones(1, np.float32), width=1)   # a scalar, a [1]
