"""config/: descriptor XML -> validated LayerSpecs (SimpleGPU) and MvclLayers (MVCL), with
every problem as a located Diagnostic.

    from customlayers.config import load_configs, load_config_string
    configs = load_configs(["custom_layers.xml"])
    for d in configs.diagnostics: print(d.render())
    spec = configs.layers["ReLU"]

The room: what every dialect shares here (xmlload, schema, loader, diagnostics and codes,
formulas, limits, messages, elements: the checkers' base, kernel_signature: kernel heads read
from the .cl text, sources/: SourceFile and #include), each dialect a plugin folder
(simplegpu/, mvcl/: spec, checks, Dialect), and dialects.py, the table of them. Pure Python: it
imports only errors, files and dtypes (never jit/, runtime/ or pyopencl; import-linter checks).

May import: errors, settings, files, terminal, dtypes. Not jit/, graph/, runtime/ or pyopencl.
"""
from .diagnostics import Diagnostic, Diagnostics, Location
from .loader import ConfigSet, load_config_string, load_configs
from .mvcl.spec import MvclLayer, MvclSpec
from .simplegpu.spec import LayerSpec

__all__ = ["ConfigSet", "load_configs", "load_config_string", "LayerSpec", "MvclLayer",
           "MvclSpec", "Diagnostic", "Diagnostics", "Location"]
