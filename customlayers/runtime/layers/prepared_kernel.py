"""A custom layer prepared for its tensors but not yet built: the first half of Registry.bind.

Binding a SimpleGPU layer is prepare (tensors, program text, build options, the checks that need
no compiled kernel), build, finish (the checks of the compiled kernel, the BoundKernel). A
network splits the halves: its compiler builds every program of the network in one parallel
batch (device/parallel_build.py), the custom layers' with the built-ins', and then finishes
each custom layer with its built program (Registry.finish)."""
from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from ...config.simplegpu.spec import LayerSpec
from ...jit.launch import KernelLaunch
from ...jit.tensor import TensorDesc
from ..execute.kernel import data_value, kernel_launch


@dataclass(frozen=True)
class PreparedKernel:
    spec: LayerSpec
    inputs: tuple[TensorDesc, ...]          # the real input ports, as the kernel receives them
    outputs: tuple[TensorDesc, ...]
    data_descs: tuple[TensorDesc, ...]      # 1-D, in arg order
    data_values: tuple[np.ndarray | None, ...]
    source: object                          # jit.program.GeneratedProgram
    options: str                            # the build options, as built

    @property
    def local_size(self) -> tuple[int, ...] | None:
        return tuple(self.source.local_size) if self.source.local_size else None

    @property
    def global_size(self) -> tuple[int, ...]:
        return tuple(self.source.global_size)

    def launch(self) -> KernelLaunch:
        """The kernel as a KernelLaunch (what BoundKernel.launch gives once it is built)."""
        return kernel_launch(self.spec, self.source, self.options,
                             [data_value(self.spec, self.data_values, k)
                              for k in range(len(self.data_descs))])
