"""runtime/layers: the kinds of layer implementation and the catalog of loaded layer types.

registry.py       Registry: the catalog of loaded layer types; bind() = prepare + build + finish
resolver.py       what implements each node: loaded layers first, then built-ins
prepared_kernel.py  a custom layer's kernel prepared for the build (its first half)
dialects.py       per descriptor dialect: its adapter and ports (config/dialects.py is the table)
simplegpu.py      the SimpleGPU adapter: a LayerSpec as a layer implementation (jit/layer.py)
mvcl.py, mvcl_build.py  the MVCL adapter and the build of its stages
python_layer.py   the Python layer adapter: a @cpu_layer class as a layer implementation
python_loader.py  @cpu_layer and loading the modules that use it (-l, Registry.load_python)
layer_shapes.py   a loaded layer's output shapes for a model being read
layer_input_types.py  the element type each input of a layer takes when it runs alone

May import: runtime/execute, runtime/device and the floors below runtime.
"""
