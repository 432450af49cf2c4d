"""jit: pure Python, from descriptions to program text. A LayerSpec and tensor descriptions in;
program text, work sizes and launch descriptions (KernelLaunch) out; and the one interface of
every layer implementation (layer.py). Nothing here imports pyopencl: building programs and the
program cache belong to the device (runtime/).

tensor.py    TensorDesc: shape, element type, format, padding, pitches
defines.py   the built-in and user #defines of a custom layer's program (SPEC section 3)
worksizes.py the work sizes of a custom layer (SPEC section 4)
bindings.py  the tensors a custom layer's kernel receives (kernel_tensors)
program.py   a custom layer's complete program text, with its line map (GeneratedProgram)
mvcl_program.py  an MVCL layer's stage programs (MvclProgram, a GeneratedProgram) and the
             arguments each kernel parameter binds, over the same TensorDescs
cl_includes.py  the built-in kernels' `#include "helper.cl"`, expanded by name with #line
             directives; a program's line map read back from its #line directives
launch.py    KernelLaunch/Arg: one kernel enqueue as data; CompileContext, DeviceTraits
layer.py     LayerImpl: the one interface of built-in ops, SimpleGPU layers and later kinds
variant.py   KernelVariant: one way an implementation can run a call (name, applies, launches)

May import: config, errors, settings, files, dtypes. Not ops/, runtime/ or pyopencl.
"""
from __future__ import annotations

from .defines import builtin_defines, user_defines
from .launch import Arg, CompileContext, DeviceTraits, FusedEpilogue, KernelLaunch
from .layer import Attr, LayerCall, LayerImpl, LayerWork, Stage
from .program import GeneratedProgram, generate_program
from .tensor import TensorDesc, parse_tensor_arg
from .variant import KernelVariant
from .worksizes import compute_work_sizes

__all__ = [
    "user_defines", "builtin_defines", "compute_work_sizes", "GeneratedProgram",
    "generate_program", "TensorDesc", "parse_tensor_arg", "KernelLaunch", "Arg",
    "CompileContext", "DeviceTraits", "FusedEpilogue", "Attr", "LayerCall", "LayerImpl",
    "LayerWork", "Stage", "KernelVariant",
]
