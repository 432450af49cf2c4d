"""passes/window_folding.py on graphs built directly (no device): a zero Pad becomes the
convolution's padding, a causal Slice a smaller pads_end; anything else is left as written."""
import numpy as np

from customlayers.passes.window_folding import fold_into_convolutions
from interop_graphs import Builder


def builtin(node):
    return True


def _pad_conv(pad_value=0.0, pads_begin=(0, 0, 1, 2), pads_end=(0, 0, 1, 2)):
    b = Builder("pad")
    x = b.param("x", (1, 3, 6, 6))
    padded = (1, 3, 6 + pads_begin[2] + pads_end[2], 6 + pads_begin[3] + pads_end[3])
    pad = b.op("Pad", [x, b.const(np.array(pads_begin, np.int64)),
                       b.const(np.array(pads_end, np.int64)),
                       b.const(np.float32(pad_value))], padded, {"pad_mode": "constant"},
               name="pad")
    w = b.const(np.ones((4, 3, 3, 3), np.float32))
    conv = b.op("Convolution", [pad, w], (1, 4, padded[2] - 2, padded[3] - 2),
                {"strides": "1,1", "pads_begin": "1,0", "pads_end": "0,0",
                 "dilations": "1,1", "auto_pad": "explicit"}, name="conv")
    b.result(conv)
    return b.g


def test_a_zero_pad_becomes_the_convolutions_padding():
    new, notes = fold_into_convolutions(_pad_conv(), builtin)
    assert notes == ["folded Pad 'pad' into the padding of 'conv'"]
    assert "pad" not in new.nodes and [n.type for n in new].count("Const") == 1   # the weights
    conv = new.nodes["conv"]
    assert conv.attrs["pads_begin"] == "2,2" and conv.attrs["pads_end"] == "1,2"
    assert new.producer("conv", 0) == ("x", 0) and conv.inputs[0].shape == (1, 3, 6, 6)


def test_a_pad_of_another_value_or_a_custom_pad_is_not_folded():
    g = _pad_conv(pad_value=1.0)
    assert fold_into_convolutions(g, builtin) == (g, [])
    g = _pad_conv()
    assert fold_into_convolutions(g, lambda n: n.type != "Pad") == (g, [])
    g = _pad_conv(pads_begin=(0, 1, 1, 2))          # a channel pad is no convolution padding
    assert fold_into_convolutions(g, builtin) == (g, [])


def _tcn(stop=-4, relu=True):
    """Conv1d padded (k-1)*d = 4 on both sides, a bias Add, a ReLU, then the "chomp" Slice."""
    b = Builder("tcn")
    x = b.param("x", (1, 2, 10))
    w = b.const(np.ones((2, 2, 3), np.float32))
    y = b.op("Convolution", [x, w], (1, 2, 14),
             {"strides": "1", "pads_begin": "4", "pads_end": "4", "dilations": "2"},
             name="conv")
    y = b.op("Add", [y, b.const(np.zeros((1, 2, 1), np.float32))], (1, 2, 14), name="bias")
    if relu:
        y = b.op("ReLU", [y], (1, 2, 14), name="relu")
    kept = 14 + stop if stop < 0 else stop
    sl = b.op("Slice", [y] + [b.const(np.array([v], np.int64)) for v in (0, stop, 1, 2)],
              (1, 2, kept), name="chomp")
    b.result(sl)
    return b.g


def test_a_causal_slice_becomes_a_smaller_pads_end_through_the_per_channel_layers():
    new, notes = fold_into_convolutions(_tcn(), builtin)
    assert notes == ["folded the causal Slice 'chomp' into the padding of 'conv'"]
    assert "chomp" not in new.nodes
    assert new.nodes["conv"].attrs["pads_end"] == "0"
    for nid in ("conv", "bias", "relu"):
        assert new.nodes[nid].outputs[0].shape == (1, 2, 10)
    assert new.nodes["relu"].outputs[0].names == ("chomp", "relu")   # the Slice's name kept
    result = next(n for n in new if n.type == "Result")
    assert new.producer(result.id, 0) == ("relu", 0)


def test_a_slice_counted_from_the_start_is_not_folded():
    g = _tcn(stop=10)               # depends on the declared length: left as written
    assert fold_into_convolutions(g, builtin) == (g, [])


def test_a_causal_slice_folds_where_the_length_is_left_open():
    """torch's export with a dynamic T: the cut off the end is the same for every length."""
    b = Builder("tcn")
    x = b.param("x", (None, 2, None))
    w = b.const(np.ones((2, 2, 3), np.float32))
    y = b.op("Convolution", [x, w], (None, 2, None),
             {"strides": "1", "pads_begin": "4", "pads_end": "4", "dilations": "2"},
             name="conv")
    sl = b.op("Slice", [y] + [b.const(np.array([v], np.int64)) for v in (0, -4, 1, 2)],
              (None, 2, None), name="chomp")
    b.result(sl)
    new, notes = fold_into_convolutions(b.g, builtin)
    assert notes == ["folded the causal Slice 'chomp' into the padding of 'conv'"]
    assert new.nodes["conv"].attrs["pads_end"] == "0"
    assert new.nodes["conv"].outputs[0].shape == (None, 2, None)
