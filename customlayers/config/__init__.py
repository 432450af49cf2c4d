"""config/: descriptor XML -> validated LayerSpecs (SimpleGPU) and MvclLayers (MVCL), with
every problem as a located Diagnostic.

    from customlayers.config import load_configs, load_config_string
    configs = load_configs(["custom_layers.xml"])
    for d in configs.diagnostics: print(d.render())
    spec = configs.layers["ReLU"]
"""
from .diagnostics import Diagnostic, Diagnostics, Location
from .loader import ConfigSet, load_config_string, load_configs
from .mvcl_spec import MvclLayer, MvclSpec
from .spec import LayerSpec

__all__ = ["ConfigSet", "load_configs", "load_config_string", "LayerSpec", "MvclLayer",
           "MvclSpec", "Diagnostic", "Diagnostics", "Location"]
