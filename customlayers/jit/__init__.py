"""jit: from a LayerSpec and tensor descriptions to program text and work sizes (pure Python),
and the build step with its program cache (the only part that touches pyopencl, loaded lazily).
"""
from __future__ import annotations

from .defines import builtin_defines, check_define_value, user_defines
from ..config.formulas import Formula, evaluate_work_sizes, parse_formula, parse_formula_list
from .program import GeneratedProgram, generate_program
from .tensor import TensorDesc, parse_tensor_arg
from .worksizes import compute_work_sizes

__all__ = [
    "Formula", "parse_formula", "parse_formula_list", "evaluate_work_sizes",
    "check_define_value", "user_defines", "builtin_defines",
    "compute_work_sizes", "GeneratedProgram", "generate_program",
    "TensorDesc", "parse_tensor_arg", "ProgramCache", "compile_check",
]


def __getattr__(name: str):
    # the build step imports pyopencl; config/ and the pure JIT must not need it
    if name == "ProgramCache":
        from .cache import ProgramCache
        return ProgramCache
    if name == "compile_check":
        from .build import compile_check
        return compile_check
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
