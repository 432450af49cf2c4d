"""config/mvcl/: the MVCL (VPU) dialect as a plugin (SPEC section 6): MvclSpec and MvclLayer
(spec.py), the checks of one <CustomLayer type="MVCL"> element (checks.py), the grouping of a
file's elements into layers of variants and stages (layers.py), and its Dialect (dialect.py).
Its program generation is jit/mvcl_program.py, its runtime adapter runtime/layers/mvcl.py. It imports
only config's shared modules and errors.

May import: config's shared modules, errors and files.
"""
from .dialect import MVCL
from .spec import MvclLayer, MvclSpec

__all__ = ["MVCL", "MvclLayer", "MvclSpec"]
