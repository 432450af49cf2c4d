"""Col2Im: ONNX Col2Im (opset 18), the inverse of an im2col (sliding blocks summed back into
an image), on col2im.cl (one program per element type; the geometry is a kernel argument).

Input N, C*prod(block_shape), L; image_shape and block_shape are compile-time values (constants,
or graph inputs given per run); output N, C, *image_shape.
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, numel, program_text, shape_of
from ..base import Attr, Op, register_op

MAX_SPATIAL = 8      # col2im.cl's MAX_S


@register_op
class Col2Im(Op):
    type = "Col2Im"
    input_count = (3, 3)
    const_inputs = (1, 2)
    attributes = (Attr("dilations", "ints", ()), Attr("pads", "ints", ()),
                  Attr("strides", "ints", ()))

    def _geometry(self, attrs, inputs, consts) -> tuple[int, list[list[int]]]:
        """(channels, per spatial axis [image, block, blocks, stride, dilation, pad_begin])."""
        for k, what in ((1, "image_shape"), (2, "block_shape")):
            if k not in consts:
                raise BindingError(f"Col2Im: the {what} (input {k}) must be a constant or a "
                                   f"graph input given per run")
        image = [int(v) for v in np.asarray(consts[1]).reshape(-1)]
        block = [int(v) for v in np.asarray(consts[2]).reshape(-1)]
        s = len(image)
        x = shape_of(inputs[0])
        strides = list(attrs["strides"] or [1] * s)
        dilations = list(attrs["dilations"] or [1] * s)
        pads = list(attrs["pads"] or [0] * 2 * s)
        if not 1 <= s <= MAX_SPATIAL or len(block) != s or len(strides) != s or \
                len(dilations) != s or len(pads) != 2 * s or min(image + block + strides +
                                                                  dilations) < 1 or min(pads) < 0:
            raise BindingError(f"Col2Im: image_shape {image}, block_shape {block}, strides "
                               f"{strides}, dilations {dilations} and pads {pads} must give 1 "
                               f"to {MAX_SPATIAL} spatial axes (pads two per axis), positive "
                               f"(pads not negative)")
        blocks = [(image[a] + pads[a] + pads[s + a] - dilations[a] * (block[a] - 1) - 1)
                  // strides[a] + 1 for a in range(s)]
        kernel = int(np.prod(block))
        if len(x) != 3 or x[1] % kernel or x[2] != int(np.prod(blocks)) or min(blocks) < 1:
            raise BindingError(f"Col2Im: the input {list(x)} must be N, C*{kernel} (the block "
                               f"{block}), {int(np.prod(blocks))} (the blocks {blocks} that fit "
                               f"the image {image})")
        if inputs[0].dtype not in ("f32", "f16"):
            raise BindingError(f"Col2Im: the input has element type {inputs[0].dtype}; "
                               f"supported: f32, f16")
        return x[1] // kernel, [[image[a], block[a], blocks[a], strides[a], dilations[a],
                                 pads[a]] for a in range(s)]

    def infer_shapes(self, attrs, inputs, consts):
        channels, axes = self._geometry(attrs, inputs, consts)
        return [((shape_of(inputs[0])[0], channels, *(m[0] for m in axes)), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        channels, axes = self._geometry(attrs, inputs, consts)
        dims = np.array([len(axes), *(v for m in axes for v in m)], np.int32)
        count = numel(outputs[0].shape)
        source = program_text("col2im", {"T": inputs[0].cl_type}, "col2im.cl")
        args = (Arg.input(0), Arg.output(0), Arg.const(dims), Arg.scalar(np.int32(channels)),
                Arg.scalar(np.uint32(count)))
        return [KernelLaunch(source, "col2im", args, global_1d(count), label="col2im")]
