"""config/simplegpu/: the SimpleGPU dialect as a plugin (SPEC section 2): LayerSpec (spec.py),
the checks that build it from a <CustomLayer type="SimpleGPU"> element and register it
(checks.py), the literal rules of Define values (define_values.py), which model attributes a
layer reads (params.py), and its Dialect (dialect.py). It imports only config's shared modules
(diagnostics, elements, formulas, limits, messages, sources, xmlload) and errors.

May import: config's shared modules, errors and files.
"""
from .dialect import SIMPLE_GPU
from .spec import DataBinding, DefineSpec, LayerSpec, TensorBinding, WorkSizesSpec

__all__ = ["SIMPLE_GPU", "LayerSpec", "DefineSpec", "TensorBinding", "DataBinding",
           "WorkSizesSpec"]
