"""The built-in op base class and the registry of built-ins.

A built-in op is a small class: it declares its attributes as data (checked when the model is
loaded, not when it runs), infers output shapes, and describes its work as KernelLaunch values
(jit/launch.py), the same currency custom layers use. `Op` implements the one layer interface
(jit/layer.py: LayerImpl) on top of `infer_shapes` and `launches`. Register with `@register_op`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import UnknownLayerError
from ..jit.launch import DEFAULT_CONTEXT, CompileContext, KernelLaunch
from ..jit.layer import Attr, LayerCall, LayerImpl, LayerWork, Stage, parse_attr  # noqa: F401
from ..jit.tensor import TensorDesc
from ..jit.variant import KernelVariant


class Op(LayerImpl):
    """Base of built-in ops. Subclasses set `type` and `attributes` and implement the rest."""
    half_as_float = True     # half tensors without cl_khr_fp16: float copies (half_storage.py)

    def infer_shapes(self, attrs: dict[str, Any], inputs: Sequence[TensorDesc],
                     consts: Mapping[int, np.ndarray]) -> list[tuple[tuple[int, ...], str]]:
        """Output (shape, dtype) for each output port. `consts` holds constant input values."""
        raise NotImplementedError

    def launches(self, attrs: dict[str, Any], inputs: Sequence[TensorDesc],
                 outputs: Sequence[TensorDesc], consts: Mapping[int, np.ndarray],
                 ctx: CompileContext = DEFAULT_CONTEXT) -> list[KernelLaunch]:
        """The kernels that compute the outputs from the inputs, in order (dense BFYX f32
        tensors unless the op says otherwise)."""
        raise NotImplementedError

    def kernel_variants(self, attrs: dict[str, Any], inputs: Sequence[TensorDesc],
                        outputs: Sequence[TensorDesc], consts: Mapping[int, np.ndarray],
                        ctx: CompileContext = DEFAULT_CONTEXT) -> tuple[KernelVariant, ...]:
        """The variants `launches` can run (LayerImpl.variants, jit/variant.py), when there are
        two or more; ctx.variant is the one to run (None: the op's heuristic pick)."""
        return ()

    # -- the layer interface ---------------------------------------------------------------
    def variants(self, call: LayerCall,
                 outputs: Sequence[TensorDesc]) -> tuple[KernelVariant, ...]:
        return self.kernel_variants(call.attrs, call.inputs, outputs, call.consts, call.context)

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        return [TensorDesc(shape, dtype)
                for shape, dtype in self.infer_shapes(call.attrs, call.inputs, call.consts)]

    def work(self, call: LayerCall, outputs: Sequence[TensorDesc]) -> LayerWork:
        launches = self.launches(call.attrs, call.inputs, outputs, call.consts, call.context)
        epilogue = call.context.epilogue
        step_type = f"{call.type}+{epilogue.label}" if epilogue is not None else call.type
        entries = ",".join(dict.fromkeys(launch.entry for launch in launches))
        return LayerWork([Stage(call.name, step_type, self.impl, entries, launches,
                                [("in", i) for i in range(len(call.inputs))],
                                [("out", j) for j in range(len(outputs))],
                                list(call.inputs), list(outputs))])


OPS: dict[str, Op] = {}


def register_op(cls: type[Op]) -> type[Op]:
    """Class decorator: register one instance of the op under its `type`."""
    if not cls.type:
        raise TypeError(f"{cls.__name__} has no type")
    if cls.type in OPS:  # two modules claiming one type: the second would silently win
        raise TypeError(f"op type '{cls.type}' is registered twice ({type(OPS[cls.type]).__name__} "
                        f"and {cls.__name__})")
    OPS[cls.type] = cls()
    return cls


def get_op(op_type: str) -> Op:
    try:
        return OPS[op_type]
    except KeyError:
        raise UnknownLayerError(f"no built-in op of type '{op_type}'; known: "
                                f"{', '.join(sorted(OPS))}") from None
