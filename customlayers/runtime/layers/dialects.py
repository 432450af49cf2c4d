"""What the runtime does differently per descriptor dialect (config/dialects.py is the table of
dialects): the adapter that runs a layer of it (jit.layer.LayerImpl over its descriptor), and
the facts about one layer that depend on its attributes (an MVCL layer's <Where> variant
decides its ports and blobs). One object per dialect, keyed by the adapter's name, which the
dialect's Dialect gives (config/ is below runtime/: it names its adapter, this table resolves
the name).

Both adapters compile through the one layer-compile pipeline: the dialect's program from jit/
(program.py, mvcl_program.py: GeneratedPrograms over TensorDescs), checked and built by
build.py's build_layer_kernel; Registry.bind is SimpleGPU's entry into it, mvcl_build.py's
compile_mvcl MVCL's (one program per stage). In a network both only prepare (Registry.prepare,
mvcl_build.prepare_mvcl): the compiler builds their programs with the built-ins' in one parallel
batch, then their LayerWork.after_build checks the built kernels (Registry.finish,
mvcl_build.finish_stage).

Imports of the dialect's own modules are made on use: those modules import this table's users.
"""
from __future__ import annotations

from typing import Mapping

from ...config.dialects import Dialect, dialect_of


class SimpleGpuRuntime:
    """One kernel, its ports and <Data> blobs declared by the descriptor."""

    def adapter(self):
        from .simplegpu import SimpleGpuLayer
        return SimpleGpuLayer

    def input_count(self, spec, params: Mapping[str, str]) -> int:
        return spec.num_input_ports

    def output_count(self, spec, params: Mapping[str, str]) -> int:
        return spec.num_output_ports

    def data_names(self, spec, params: Mapping[str, str]) -> list[str]:
        return [d.name for d in spec.data]

    def unused_params(self, spec, params: Mapping[str, str]):
        """The given parameters no Define reads (they would run the default)."""
        from ...config.simplegpu.params import unused_params
        return unused_params(spec, params)

    def unused_params_message(self, spec, unused) -> str:
        from ...config.simplegpu.params import unused_params_message
        return unused_params_message(spec, unused)

    def declared_types(self, spec, params: Mapping[str, str]):
        from .layer_input_types import kernel_declared_types
        return kernel_declared_types(spec)


class MvclRuntime:
    """Stages and <Where> variants: the variant for the attributes decides ports and blobs."""

    def adapter(self):
        from .mvcl import MvclLayerImpl
        return MvclLayerImpl

    def input_count(self, spec, params: Mapping[str, str]) -> int:
        from .mvcl_build import select_stages
        ports = [t.port_index for s in select_stages(spec, params) for t in s.tensors("input")]
        return max(ports, default=-1) + 1

    def output_count(self, spec, params: Mapping[str, str]) -> int:
        from .mvcl import output_layouts
        from .mvcl_build import select_stages
        return len(output_layouts(select_stages(spec, params)))

    def data_names(self, spec, params: Mapping[str, str]) -> list[str]:
        from .mvcl import blob_names
        from .mvcl_build import select_stages
        return sorted(blob_names(select_stages(spec, params)))

    def unused_params(self, spec, params: Mapping[str, str]):
        """The given parameters that no <Where>, Scalar or formula of any variant reads."""
        from ...config.mvcl.params import used_attributes
        from ...config.simplegpu.params import unused_of
        return unused_of(used_attributes(spec), params)

    def unused_params_message(self, spec, unused) -> str:
        from ...config.mvcl.params import used_attributes
        from ...config.simplegpu.params import unused_params_message
        return unused_params_message(spec, unused, used_attributes(spec))

    def declared_types(self, spec, params: Mapping[str, str]):
        from .layer_input_types import stage_declared_types
        return stage_declared_types(spec, params)


# by the adapter's name (Dialect.adapter)
RUNTIME_DIALECTS: dict[str, object] = {"SimpleGpuLayer": SimpleGpuRuntime(),
                                       "MvclLayerImpl": MvclRuntime()}


def runtime_of(spec):
    """The runtime side of a loaded layer's dialect; None when this version cannot run it."""
    return RUNTIME_DIALECTS.get(dialect_of(spec).adapter)


__all__ = ["Dialect", "dialect_of", "runtime_of", "RUNTIME_DIALECTS"]
