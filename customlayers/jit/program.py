"""Program assembly (SPEC section 3): the complete OpenCL C text of one custom layer.

Order: built-in defines, a comment naming the layer, user defines, then each source file, each
preceded by a comment with its file name and a `#line 1 "<file>"` directive, so the compiler
reports errors at the user's own file and line. `line_map` maps every generated line back too,
for compilers (or log lines) that ignore the directive.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..config.simplegpu.spec import LayerSpec
from ..config.sources.source_text import SourceFile, append_sources
from .defines import builtin_defines, render_define, user_defines
from .tensor import TensorDesc
from .worksizes import compute_work_sizes


@dataclass(frozen=True)
class GeneratedProgram:
    text: str
    entry: str
    options: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    # line_map[n - 1] is where generated line n came from: (file, line), or None for a line the
    # JIT wrote (defines, comments, directives)
    line_map: tuple = ()
    layer: str = ""

    def origin(self, line: int) -> tuple[str, int] | None:
        """Generated 1-based line -> (file, line) in the user's sources, or None."""
        if 1 <= line <= len(self.line_map):
            return self.line_map[line - 1]
        return None


def assemble(builtins: Sequence[tuple[str, str]], layer_comment: str,
             users: Sequence[tuple[str, str]],
             sources: Sequence[SourceFile]) -> tuple[str, tuple]:
    """The program text and its line map."""
    lines: list[str] = []
    origins: list = []

    def generated(text: str) -> None:
        lines.append(text)
        origins.append(None)

    for name, value in builtins:
        generated(render_define(name, value))
    generated(f"// {layer_comment}")
    for name, value in users:
        generated(render_define(name, value, user=True))
    append_sources(lines, origins, sources)
    return "\n".join(lines) + "\n", tuple(origins)


def generate_program(spec: LayerSpec, inputs: Sequence[TensorDesc],
                     outputs: Sequence[TensorDesc],
                     params: Mapping[str, str] = {}) -> GeneratedProgram:
    """The program of `spec` for these tensors. `inputs` are all INPUTk tensors: the real inputs by
    port index, then the Data blobs (1-D) in arg order. Raises FormulaError or DefineError."""
    global_size, local_size = compute_work_sizes(spec, inputs, outputs, params)
    builtins = builtin_defines(inputs, outputs, global_size, local_size)
    users = user_defines(spec, params)
    comment = f"Custom layer {spec.name} ({spec.type}), entry {spec.entry}"
    text, line_map = assemble(builtins, comment, users, spec.sources)
    return GeneratedProgram(text=text, entry=spec.entry, options=spec.options,
                            global_size=global_size, local_size=local_size,
                            line_map=line_map, layer=spec.name)
