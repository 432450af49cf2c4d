"""What the CLI does differently per descriptor dialect (config/dialects.py is the table of
dialects; runtime/layers/dialects.py the runtime's side): how `layers` describes a layer, how `jit`
prints its program(s), how `validate --compile` compiles it. One object per dialect, keyed by
the dialect's name.

The commands' modules are imported on use: they import this table.
"""
from __future__ import annotations


class SimpleGpuCli:
    def describe(self, spec) -> list[str]:
        from .layers import describe_layer
        return describe_layer(spec)

    def print_program(self, spec, inputs, outputs, param_items) -> int:
        """`jit`: --param items are parsed where the program needs them (after the counts)."""
        from .jit import print_kernel_program
        return print_kernel_program(spec, inputs, outputs, param_items)

    def compile_diagnostics(self, registry, spec, given, params, args) -> list:
        from .validate import compile_diagnostics
        return compile_diagnostics(registry, spec.name, given or [], params,
                                   check_bounds=args.check_bounds, sanitize=args.sanitize)


class MvclCli:
    def describe(self, spec) -> list[str]:
        from .layers import describe_mvcl_layer
        return describe_mvcl_layer(spec)

    def print_program(self, spec, inputs, outputs, param_items) -> int:
        from .jit import print_stage_programs
        return print_stage_programs(spec, inputs, outputs, param_items)

    def compile_diagnostics(self, registry, spec, given, params, args) -> list:
        # every <Where> variant, with attributes from --param and defaults (mvcl_validate)
        from ...jit.tensor import TensorDesc
        from .mvcl_validate import mvcl_compile_diagnostics
        from .validate import DEFAULT_INPUT_SHAPE
        descs = [desc for desc, _ in given] if given else [TensorDesc(DEFAULT_INPUT_SHAPE)]
        found = mvcl_compile_diagnostics(registry, spec, descs, params)
        from ..common import kernel_checks_asked
        asked = kernel_checks_asked(args)
        if asked:       # said, never a silent pass: the stages are built, not checked
            from ...config.diagnostics import WARNING, Diagnostic
            found.append(Diagnostic.at(spec.location, WARNING, "CL119",
                                       f"validate's {' and '.join(asked)} do not check MVCL "
                                       f"layers: layer '{spec.name}' was built, its kernels "
                                       f"not checked; run-layer (with --output-shape) or run "
                                       f"checks its stages with them", spec.name))
        return found


CLI_DIALECTS: dict[str, object] = {"SimpleGPU": SimpleGpuCli(), "MVCL": MvclCli()}


def cli_of(spec):
    """The CLI side of a loaded layer's dialect."""
    return CLI_DIALECTS[spec.kind]
