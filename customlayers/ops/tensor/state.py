"""A model's state: OpenVINO's ReadValue (opset3, opset6) and Assign, over a tensor the
request owns and keeps on the device across its runs (jit/layer.py: state_ref; the request's
buffers: runtime/execute/states.py).

ReadValue reads the state into its output: the state as the previous run's Assign (or
set_state) left it, or, after a reset (and before any run), its init input, else zeros.
Assign copies its input into the state; the compiler runs it after every other step
(LayerImpl.stores_state), so that every ReadValue of the run sees the previous value.

The variable's tensor: ReadValue's init input where it has one (opset3 has only that),
else its variable_shape and variable_type (opset6), a dynamic dim there taken from the
output port the model declares; a dim still unknown is refused naming the layer.
"""
from __future__ import annotations

import numpy as np

from ...dtypes import IR_ELEMENT_TYPES
from ...errors import BindingError, shape_text
from ...graph.ir import parse_shape_text
from ...jit.launch import Arg, KernelLaunch
from ...jit.layer import LayerCall, LayerWork, Stage, state_ref
from ...jit.tensor import TensorDesc
from .._program import global_1d, numel, program_text
from ..base import Attr, Op, register_op

# the unsigned integer each element is copied as, by its size in bytes: the bits move as they are
_WORDS = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}


def _word(desc: TensorDesc, where: str) -> str:
    word = _WORDS.get(desc.itemsize)
    if word is None or not desc.is_plain:
        raise BindingError(f"{where}: a state of {desc.dtype} ({desc.describe()}) is not "
                           f"supported; expected a dense tensor of 1, 2, 4 or 8-byte elements")
    return word


class _StateOp(Op):
    half_as_float = False     # the bits are copied: a half state needs no cl_khr_fp16
    reads_half = True

    @staticmethod
    def variable(call: LayerCall) -> str:
        name = call.attrs["variable_id"]
        if not name:
            raise BindingError(f"{call.where}: variable_id is empty; a {call.type} names the "
                               f"variable it reads or writes")
        return name


@register_op
class ReadValue(_StateOp):
    type = "ReadValue"
    input_count = (0, 1)
    attributes = (Attr("variable_id", "str", required=True), Attr("variable_shape", "str"),
                  Attr("variable_type", "str"))

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        declared_shape, declared_type = call.declared[0] if call.declared else (None, None)
        shape = self._declared_variable_shape(call, declared_shape)
        dtype = self._variable_type(call) or declared_type or None
        if call.inputs:                        # the init gives the variable's tensor
            init = call.inputs[0]
            if shape is not None and not _fits(shape, init.shape) or \
                    dtype is not None and dtype != init.dtype:
                raise BindingError(
                    f"{call.where}: the init input is {list(init.shape)} {init.dtype}, but "
                    f"variable '{self.variable(call)}' is declared {_fmt(shape)} "
                    f"{dtype or '(any type)'}")
            return [TensorDesc(init.shape, init.dtype)]
        if shape is None or None in shape or not dtype:
            raise BindingError(
                f"{call.where}: variable '{self.variable(call)}' has no init input, and its "
                f"shape {_fmt(shape)} or type ({dtype or 'not given'}) is not known; expected "
                f"a static variable_shape and a variable_type (or an init input)")
        return [TensorDesc(shape, dtype)]

    @staticmethod
    def _declared_variable_shape(call: LayerCall, port_shape) -> tuple | None:
        """variable_shape, its dynamic dims taken from the output port's static ones; None
        when the model gives neither."""
        text = call.attrs["variable_shape"]
        if text is None or text.strip() in ("", "...", "?"):
            return tuple(port_shape) if port_shape is not None else None
        shape = parse_shape_text(text, allow_dynamic=True)
        if shape is None:
            raise BindingError(f"{call.where}: variable_shape='{text[:40]}' is not a list of "
                               f"dims")
        if port_shape is not None and len(port_shape) == len(shape):
            shape = tuple(d if d is not None else p for d, p in zip(shape, port_shape))
        return shape

    @staticmethod
    def _variable_type(call: LayerCall) -> str | None:
        text = (call.attrs["variable_type"] or "").strip().lower()
        if text in ("", "dynamic", "undefined"):
            return None
        dtype = IR_ELEMENT_TYPES.get(text)
        if dtype is None:
            raise BindingError(f"{call.where}: variable_type '{text[:20]}' is not supported; "
                               f"expected one of {', '.join(IR_ELEMENT_TYPES)}")
        return dtype

    def work(self, call: LayerCall, outputs) -> LayerWork:
        out = outputs[0]
        name = self.variable(call)
        word = _word(out, call.where)
        init = bool(call.inputs)
        count = numel(out.shape)
        src = program_text(f"read_value_{word}", {"WORD": word, "WITH_INIT": int(init)},
                           "state.cl")
        args = (Arg.input(0), *((Arg.input(1),) if init else ()), Arg.output(0),
                Arg.scalar(np.uint32(count)), Arg.state_flag(name))
        launch = KernelLaunch(src, "read_value", args, global_1d(count), label="read_value")
        inputs = [state_ref(name)] + [("in", 0)] * init
        return LayerWork([Stage(call.name, call.type, self.impl, "read_value", [launch],
                                inputs, [("out", 0)], [out] + list(call.inputs), [out])],
                         states={name: out})


@register_op
class Assign(_StateOp):
    type = "Assign"
    input_count = (1, 1)
    attributes = (Attr("variable_id", "str", required=True),)
    stores_state = True

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        # its output, where the model gives it a port, is the value it stores: the compiler
        # makes it input 0's tensor (LayerImpl.stores_state)
        return [call.inputs[0]] if call.declared else []

    def work(self, call: LayerCall, outputs) -> LayerWork:
        value = call.inputs[0]
        name = self.variable(call)
        word = _word(value, call.where)
        count = numel(value.shape)
        src = program_text(f"assign_{word}", {"WORD": word, "WITH_INIT": 0}, "state.cl")
        launch = KernelLaunch(src, "assign", (Arg.input(0), Arg.output(0),
                                              Arg.scalar(np.uint32(count))),
                              global_1d(count), label="assign")
        return LayerWork([Stage(call.name, call.type, self.impl, "assign", [launch],
                                [("in", 0)], [state_ref(name)], [value], [value])],
                         states={name: value})


def _fits(shape: tuple, actual: tuple) -> bool:
    return len(shape) == len(actual) and all(d is None or d == a for d, a in zip(shape, actual))


def _fmt(shape) -> str:
    return "(no shape)" if shape is None else shape_text(shape, ",")
