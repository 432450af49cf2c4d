"""The MVCL dialect (SPEC section 6): the VPU plugin's descriptor, stages and <Where> variants."""
from __future__ import annotations

from ..dialect import Dialect
from .layers import MvclFileCollector
from .spec import MvclLayer

MVCL = Dialect("MVCL", one_kernel=False, shape_formula=False, schema="mvcl.schema.json",
               collector=MvclFileCollector, spec=MvclLayer,
               program="mvcl_program:generate_mvcl_stages", adapter="MvclLayerImpl")
