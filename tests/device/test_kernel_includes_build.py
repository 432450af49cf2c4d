"""Issue 19, finding 5: a built-in program is its defines and one kernel file whose helpers are
included by name (jit/cl_includes.py); PoCL's build error inside a helper names the helper's
file and line, not a line of the whole generated text."""
from __future__ import annotations

import pytest

from customlayers.errors import KernelBuildError
from customlayers.jit.cl_includes import expand_kernel_file
from customlayers.jit.launch import Arg, KernelLaunch
from customlayers.ops._program import defines, read_kernel_file
from customlayers.ops.nn import _sizes
from customlayers.runtime.device.cache import ProgramCache

# the window and the epilogue are defines; the sizes are the kernel's parameters (_sizes.py)
SIZES = dict(KH=3, KW=3, CONV_SIZES=_sizes.params(_sizes.CONV_2D), FUSED_BIAS=0, FUSED_RELU=0,
             FUSED_RESIDUAL=0, FUSED_PRE_RELU=0)


def test_a_build_error_in_an_included_helper_names_the_helper(cl_env, tmp_path):
    ctx, _, dev = cl_env
    good = read_kernel_file("conv_window.cl")
    broken = good.replace("return acc;", "return acc + missing;", 1)
    line = broken.split("\n").index("    return acc + missing;") + 1

    def read(name: str) -> str:
        return broken if name == "conv_window.cl" else read_kernel_file(name)

    source = defines(**SIZES) + expand_kernel_file("conv_direct.cl", read)
    launch = KernelLaunch(source, "conv_direct", (Arg.input(0),), (2, 2, 1))
    with pytest.raises(KernelBuildError) as info:
        ProgramCache(tmp_path).build(ctx, dev, launch.source, line_map=launch.line_map,
                                     label="conv")
    assert f"conv_window.cl:{line}:" in info.value.log and "missing" in info.value.log


def test_the_same_program_unbroken_builds(cl_env, tmp_path):
    ctx, _, dev = cl_env
    source = defines(**SIZES) + expand_kernel_file("conv_direct.cl", read_kernel_file)
    ProgramCache(tmp_path).build(ctx, dev, source)
