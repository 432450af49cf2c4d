"""The SimpleGPU dialect (SPEC section 2): OpenVINO's GPU custom-kernel descriptor."""
from __future__ import annotations

from ..dialect import Dialect
from .checks import SimpleGpuFileCollector
from .spec import LayerSpec

SIMPLE_GPU = Dialect("SimpleGPU", one_kernel=True, shape_formula=True,
                     schema="customlayer.schema.json", collector=SimpleGpuFileCollector,
                     spec=LayerSpec, program="program:generate_program", adapter="SimpleGpuLayer")
