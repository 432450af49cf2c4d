"""Tensor plumbing used by converted ONNX models: Convert, Pad, Gather, Slice, StridedSlice,
Tile, Broadcast (OpenVINO opset semantics).

Shapes, axes and pads come from constant inputs and are baked into the program. Everything
but Gather is an index map run on unary_map.cl: Slice/StridedSlice/Tile/Broadcast are linear
views of the input (ops/_program.py), Pad adds a per-axis map (constant fill, clamp, mirror).
"""
from __future__ import annotations


import numpy as np

from ...dtypes import is_float
from ...errors import BindingError, TensorError
from ...jit.tensor import TensorDesc, normalize_dtype
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import (items_per_work_item, LinearView,
                       broadcast_shapes, c_float,
                       float_compute, global_1d, normalize_axis, numel,
                       program_text, shape_of, uint_arg, unary_map_launch)
from .._half_io import moved_type
from .._indexing import apply_index
from ..base import Attr, Op, register_op
from .views import const_values


def _view_launch(label: str, src: TensorDesc, dst: TensorDesc, view: LinearView,
                 per_item: int = 1) -> KernelLaunch:
    return unary_map_launch(label, src, dst, src_view=view, per_item=per_item)


@register_op
class Convert(Op):
    """Element type conversion with C semantics: float to integer truncates (saturating, NaN
    gives 0), integer to narrower integer wraps; destination 'boolean' gives x != 0 as u8."""
    input_count = (1, 1)
    type = "Convert"
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    attributes = (Attr("destination_type", "str", required=True),)

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        text = attrs["destination_type"]
        try:
            attrs["dtype"] = normalize_dtype(text)
        except TensorError as e:
            raise BindingError(f"layer '{layer}' (Convert): destination_type: {e}") from None
        attrs["boolean"] = text.strip().lower() in ("boolean", "bool")
        return attrs

    def infer_shapes(self, attrs, inputs, consts):
        return [(shape_of(inputs[0]), attrs["dtype"])]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        src, dst = inputs[0], outputs[0]
        load, _ = float_compute(src.dtype)
        _, store = float_compute(dst.dtype)
        fn = None
        if attrs["boolean"]:
            fn = "(x != 0)"
        elif is_float(src.dtype) and not is_float(dst.dtype):
            store = f"convert_{dst.cl_type}_sat(v)"
        return [unary_map_launch("convert", src, dst, fn=fn, load=load, store=store,
        per_item=items_per_work_item(ctx))]


@register_op
class Pad(Op):
    """Pad-1/12: pads_begin/pads_end (inputs 1, 2; negative values crop), pad_value (input 3,
    constant mode only, default 0), pad_mode constant | edge | reflect | symmetric | wrap
    (ONNX's Pad-19: periodic)."""
    input_count = (3, 4)
    type = "Pad"
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    attributes = (Attr("pad_mode", "str", "constant"),)
    const_inputs = (1, 2, 3)
    MODES = ("constant", "edge", "reflect", "symmetric", "wrap")

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["pad_mode"] not in self.MODES:
            raise BindingError(f"layer '{layer}' (Pad): pad_mode='{attrs['pad_mode']}' is not "
                               f"one of {', '.join(self.MODES)}")
        return attrs

    def _pads(self, shape, consts):
        begin = const_values("Pad", consts, 1, "pads_begin")
        end = const_values("Pad", consts, 2, "pads_end")
        if len(begin) != len(shape) or len(end) != len(shape):
            raise BindingError(f"Pad: pads_begin {begin} and pads_end {end} need one value per "
                               f"axis of the input {list(shape)}")
        return begin, end

    def infer_shapes(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        begin, end = self._pads(shape, consts)
        out = tuple(d + b + e for d, b, e in zip(shape, begin, end))
        if any(d < 0 for d in out):          # a 0 is a zero-size result, which runs
            raise BindingError(f"Pad: pads {begin}/{end} leave nothing of {list(shape)} "
                               f"(result {list(out)})")
        return [(out, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, out = shape_of(inputs[0]), shape_of(outputs[0])
        begin, _ = self._pads(shape, consts)
        mode = attrs["pad_mode"]
        # the sizes and pads are an argument (unary_map.cl's pad_source): one program per mode
        table = [len(out), *out, *begin, *shape, *LinearView.dense(shape).strides]
        if any(abs(v) >= 2 ** 31 for v in table) or numel(out) >= 2 ** 32:
            raise BindingError(f"Pad: a result of shape {list(out)} does not fit 32-bit indices")
        pad_map = {"constant": "CONSTANT_PAD", "edge": "EDGE_PAD"}.get(mode, f"{mode}_index")
        fill = None
        if mode == "constant":
            fill = self._fill_literal(inputs, consts, outputs[0])
        launch = unary_map_launch(
            f"pad_{mode}", inputs[0], outputs[0], src_index="pad_source(src_view, i)",
            src_table=np.array(table, np.int32),
            bounds="pad_source(src_view, i) >= 0" if mode == "constant" else None, fill=fill,
            per_item=items_per_work_item(ctx), macros={"PAD_MAP(j, n)": f"{pad_map}(j, n)"})
        return [launch]

    @staticmethod
    def _fill_literal(inputs, consts, out: TensorDesc) -> str:
        if len(inputs) > 3 and 3 not in consts:
            raise BindingError("Pad: pad_value (input 3) must be a constant")
        value = np.asarray(consts[3]).reshape(-1)[0] if 3 in consts else 0
        text = c_float(float(value)) if is_float(out.dtype) else str(int(value))
        # a half output is written from float (vstore_half): no half value in the kernel
        return f"((float){text})" if out.dtype == "f16" else f"(({out.cl_type}){text})"


@register_op
class Gather(Op):
    """Gather-1/7/8 with batch_dims = 0: axis from the constant input 2; indices (input 1) may
    be computed at run time, negative ones count from the end."""
    input_count = (3, 3)
    type = "Gather"
    reads_half = True        # copies half as its bits (moved_type)
    attributes = (Attr("batch_dims", "int", 0),)
    const_inputs = (2,)

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["batch_dims"] != 0:
            raise BindingError(f"layer '{layer}' (Gather): batch_dims={attrs['batch_dims']} is "
                               f"not supported; only 0")
        return attrs

    def _axis(self, inputs, consts) -> int:
        values = const_values("Gather", consts, 2, "axis")
        if len(values) != 1:
            raise BindingError(f"Gather: axis must be one value, found {values}")
        return normalize_axis(values[0], len(inputs[0].shape), "Gather")

    def infer_shapes(self, attrs, inputs, consts):
        data, idx = shape_of(inputs[0]), shape_of(inputs[1])
        if inputs[1].dtype not in ("i32", "i64"):
            raise BindingError(f"Gather: indices must be i32 or i64, found {inputs[1].dtype}")
        axis = self._axis(inputs, consts)
        if 1 in consts and data[axis] is not None:
            _check_constant_indices(np.asarray(consts[1]), data[axis], axis)
        return [(data[:axis] + idx + data[axis + 1:], inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        data = shape_of(inputs[0])
        axis = self._axis(inputs, consts)
        count = numel(outputs[0].shape)
        types = {"IN_TYPE": moved_type(inputs[0]), "IDX_TYPE": inputs[1].cl_type,
                 "OUT_TYPE": moved_type(outputs[0])}
        sizes = (count, numel(data[axis + 1:]), numel(inputs[1].shape), data[axis])
        return [KernelLaunch(program_text("gather", types, "gather.cl"), "gather",
                             (Arg.input(0), Arg.input(1), Arg.output(0)) +
                             tuple(uint_arg(v) for v in sizes), global_1d(count),
                             label="gather")]


def _check_constant_indices(indices: np.ndarray, length: int, axis: int) -> None:
    """A constant index out of [-length, length) is the model's own mistake: refused when the
    plan is made (ONNX calls it an error; the kernel would read 0 there, OpenVINO's behaviour
    for indices computed at run time)."""
    if indices.size == 0:
        return
    low, high = int(indices.min()), int(indices.max())
    if low < -length or high >= length:
        bad = low if low < -length else high
        raise BindingError(f"Gather: the constant index {bad} is out of range for axis {axis} "
                           f"of length {length} (an index must be in [-{length}, {length}))")


class ViewMapOp(Op):
    """An op whose output is a linear view of input 0, described by `view`."""
    reads_half = True        # map kernels: half read and written as float (_half_io.py)

    def view(self, attrs, shape: tuple[int, ...], consts) -> LinearView:
        raise NotImplementedError

    def infer_shapes(self, attrs, inputs, consts):
        return [(self.view(attrs, shape_of(inputs[0]), consts).shape, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        view = self.view(attrs, shape_of(inputs[0]), consts)
        return [_view_launch(self.type.lower(), inputs[0], outputs[0], view,
        per_item=items_per_work_item(ctx))]


@register_op
class Slice(ViewMapOp):
    """Slice-8: start, stop, step (inputs 1-3) on the axes of input 4 (default 0..n-1), with
    numpy/ONNX clamping of out-of-range bounds."""
    input_count = (4, 5)
    type = "Slice"
    const_inputs = (1, 2, 3, 4)

    def view(self, attrs, shape, consts):
        start = const_values("Slice", consts, 1, "start")
        stop = const_values("Slice", consts, 2, "stop")
        step = const_values("Slice", consts, 3, "step")
        axes = const_values("Slice", consts, 4, "axes") if 4 in consts else list(range(len(start)))
        if not len(start) == len(stop) == len(step) == len(axes):
            raise BindingError(f"Slice: start {start}, stop {stop}, step {step} and axes {axes} "
                               f"need the same length")
        items: list[object] = [slice(None)] * len(shape)
        for b, e, s, a in zip(start, stop, step, axes):
            items[normalize_axis(a, len(shape), "Slice")] = slice(b, e, s)
        return apply_index(LinearView.dense(shape), items, "Slice")


@register_op
class StridedSlice(ViewMapOp):
    """StridedSlice-1: begin, end, strides (inputs 1-3, strides default 1) with the masks as
    lists of 0/1: begin/end_mask 1 ignores that bound, new_axis_mask inserts an axis,
    shrink_axis_mask takes the single index `begin`, ellipsis_mask keeps the remaining axes."""
    input_count = (3, 4)
    type = "StridedSlice"
    attributes = tuple(Attr(f"{m}_mask", "ints", ()) for m in
                       ("begin", "end", "new_axis", "shrink_axis", "ellipsis"))
    const_inputs = (1, 2, 3)

    def view(self, attrs, shape, consts):
        begin = const_values("StridedSlice", consts, 1, "begin")
        end = const_values("StridedSlice", consts, 2, "end")
        strides = (const_values("StridedSlice", consts, 3, "strides") if 3 in consts
                   else [1] * len(begin))
        if not len(begin) == len(end) == len(strides):
            raise BindingError(f"StridedSlice: begin {begin}, end {end} and strides {strides} "
                               f"need the same length")

        def bit(name, k):
            mask = attrs[f"{name}_mask"]
            return k < len(mask) and mask[k] == 1

        if sum(bit("ellipsis", k) for k in range(len(begin))) > 1:
            raise BindingError("StridedSlice: ellipsis_mask has more than one bit set")
        items: list[object] = []
        for k, (b, e, s) in enumerate(zip(begin, end, strides)):
            if bit("ellipsis", k):
                items.append(Ellipsis)
            elif bit("new_axis", k):
                items.append(None)
            elif bit("shrink_axis", k):
                items.append(b)
            else:
                items.append(slice(None if bit("begin", k) else b,
                                   None if bit("end", k) else e, s))
        return apply_index(LinearView.dense(shape), items, "StridedSlice")


@register_op
class Tile(Op):
    """Tile-1: repeats (input 1); shapes of different rank align at the end. Each output axis
    is walked as (repeat, dim) with the repeat at stride 0: still a linear map, on twice the
    axes."""
    reads_half = True        # map kernels: half read and written as float (_half_io.py)

    input_count = (2, 2)
    type = "Tile"
    const_inputs = (1,)

    def _split(self, shape, consts):
        """(output shape, split dims, split strides)"""
        repeats = const_values("Tile", consts, 1, "repeats")
        if any(r < 1 for r in repeats):
            raise BindingError(f"Tile: repeats {repeats} must all be at least 1")
        rank = max(len(shape), len(repeats))
        shape = (1,) * (rank - len(shape)) + tuple(shape)
        repeats = [1] * (rank - len(repeats)) + repeats
        dims, strides = [], []
        for d, s, r in zip(shape, LinearView.dense(shape).strides, repeats):
            dims += [r, d]
            strides += [0, s]
        return tuple(d * r for d, r in zip(shape, repeats)), dims, strides

    def infer_shapes(self, attrs, inputs, consts):
        return [(self._split(shape_of(inputs[0]), consts)[0], inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        _, dims, strides = self._split(shape_of(inputs[0]), consts)
        return [unary_map_launch("tile", inputs[0], outputs[0],
                                 src_view=LinearView(dims, strides),
                                 per_item=items_per_work_item(ctx))]


@register_op
class Broadcast(ViewMapOp):
    """Broadcast-1/3: target_shape (input 1); mode numpy (data broadcasts to the target),
    bidirectional (both broadcast) or explicit (axes_mapping, input 2, places data's axes)."""
    input_count = (2, 3)
    type = "Broadcast"
    attributes = (Attr("mode", "str", "numpy"),)
    const_inputs = (1, 2)
    MODES = ("numpy", "bidirectional", "explicit")

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["mode"] not in self.MODES:
            raise BindingError(f"layer '{layer}' (Broadcast): mode='{attrs['mode']}' is not one "
                               f"of {', '.join(self.MODES)}")
        return attrs

    def view(self, attrs, shape, consts):
        target = tuple(const_values("Broadcast", consts, 1, "target_shape"))
        mode = attrs["mode"]
        if mode == "explicit":
            return self._explicit(shape, target, const_values("Broadcast", consts, 2,
                                                              "axes_mapping"))
        if mode == "bidirectional":
            out = broadcast_shapes("Broadcast", shape, target)
        else:
            out = target
            if broadcast_shapes("Broadcast", shape, target) != target:
                raise BindingError(f"Broadcast: data of shape {list(shape)} does not broadcast "
                                   f"to the target {list(target)} (mode numpy)")
        return LinearView.dense(shape).broadcast_to(out)

    @staticmethod
    def _explicit(shape, target, mapping) -> LinearView:
        if len(mapping) != len(shape) or sorted(mapping) != list(mapping) or \
                any(not 0 <= a < len(target) for a in mapping):
            raise BindingError(f"Broadcast: axes_mapping {mapping} must list, in increasing "
                               f"order, one axis of the target {list(target)} per data axis "
                               f"({len(shape)})")
        base = LinearView.dense(shape)
        strides = [0] * len(target)
        for k, a in enumerate(mapping):
            if shape[k] not in (1, target[a]):
                raise BindingError(f"Broadcast: data axis {k} (size {shape[k]}) cannot map to "
                                   f"target axis {a} (size {target[a]})")
            strides[a] = base.strides[k] if shape[k] != 1 else 0
        return LinearView(target, tuple(strides), 0)
