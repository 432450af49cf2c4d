"""passes/shuffle_folding.py on graphs built directly (no device): a channel shuffle whose only
reader is a depthwise convolution becomes the order in which it reads its channels."""
import numpy as np

from customlayers.ops.nn.conv import InputShuffle
from customlayers.passes.shuffle_folding import fold_channel_shuffles
from interop_graphs import Builder

SHAPE = (1, 6, 5, 5)


def builtin(node):
    return True


def _depthwise(b, x, name="dw"):
    w = b.const(np.ones((6, 1, 1, 3, 3), np.float32))
    return b.op("GroupConvolution", [x, w], (1, 6, 3, 3),
                {"strides": "1,1", "pads_begin": "0,0", "pads_end": "0,0",
                 "dilations": "1,1"}, name=name)


def _ir_shuffle(second_reader=False):
    b = Builder("shuffle")
    x = b.param("x", SHAPE)
    s = b.op("ShuffleChannels", [x], SHAPE, {"axis": "1", "group": "3"}, name="shuffle")
    b.result(_depthwise(b, s))
    if second_reader:
        b.result(s)
    return b.g


def test_shuffle_channels_before_a_depthwise_convolution_is_folded():
    new, notes = fold_channel_shuffles(_ir_shuffle(), builtin)
    assert notes == ["folded the channel shuffle 'shuffle' into the input of 'dw'"]
    assert "shuffle" not in new.nodes
    assert new.nodes["dw"].facts == (InputShuffle(3),)
    assert new.producer("dw", 0) == ("x", 0)


def test_the_onnx_pattern_reshape_transpose_reshape_is_folded():
    b = Builder("onnx")
    x = b.param("x", SHAPE)
    split = b.reshape(x, (1, 2, 3, 5, 5), name="split")
    t = b.op("Transpose", [split, b.const(np.array([0, 2, 1, 3, 4], np.int64))],
             (1, 3, 2, 5, 5), name="transpose")
    merged = b.reshape(t, SHAPE, name="merge")
    b.result(_depthwise(b, merged))
    new, notes = fold_channel_shuffles(b.g, builtin)
    assert notes == ["folded the channel shuffle 'split', 'transpose', 'merge' into the input "
                     "of 'dw'"]
    assert new.nodes["dw"].facts == (InputShuffle(2),)
    assert [n.type for n in new] == ["Parameter", "Const", "GroupConvolution", "Result"]


def test_a_shuffle_read_twice_or_a_custom_convolution_is_left_as_written():
    g = _ir_shuffle(second_reader=True)
    assert fold_channel_shuffles(g, builtin) == (g, [])
    g = _ir_shuffle()
    assert fold_channel_shuffles(g, lambda n: n.type != "GroupConvolution") == (g, [])
