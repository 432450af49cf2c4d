"""The public API in one import: `from customlayers.api import Registry, TensorDesc, ...`.

    registry = Registry()                      # on the best device (Registry(engine): yours)
    registry.load("relu.xml")
    relu = registry.bind("ReLU", [TensorDesc((1, 3, 224, 224))], params={"negative_slope": "0.1"})
    y = relu(x)                                # numpy in, numpy out
    (y,) = run_layer(registry, "ReLU", [x])   # any kind of layer alone, as a one-layer network

    net = Network("model.xml", registry)       # a whole model; Engine.from_queue(q) for yours
    req = net.create_request()
    req.set_tensor("x", device_buffer)         # numpy, pyopencl.Buffer or pyopencl.array.Array
    done = req.start_async(wait_for=[event])   # a pyopencl.Event; the host does not wait
    for out in net.stream(frames, nireq=4): ...
    @cpu_layer("Softsign")                     # a CPU layer in Python (runtime/layers/python_loader.py)
    class Softsign: ...
    registry.load_python("layers.py")
"""
from __future__ import annotations

from .config.diagnostics import Diagnostic, Diagnostics, Location
from .config.loader import ConfigSet, load_config_string, load_configs
from .config.simplegpu.spec import LayerSpec
from .errors import (BindingError, ConfigError, CustomLayersError, DefineError, DeviceError,
                     ExecutionError, FormulaError, InputFileError, KernelBuildError,
                     KernelWriteError, ModelError, PackageError, PythonLayerError, TensorError,
                     UnknownLayerError)
from .jit.layer import Attr
from .jit.tensor import TensorDesc, parse_tensor_arg
from .runtime.device.device import Engine, describe_device, list_devices, select_device
from .runtime.execute.kernel import BoundKernel
from .runtime.compile.network import Network
from .runtime.compile.one_layer import run_layer
from .runtime.compile.packaged import save_package
from .runtime.execute.request import InferRequest
from .jit.launch import Arg, KernelLaunch
from .runtime.layers.python_loader import cpu_layer
from .runtime.layers.registry import Registry
from .runtime.checks.bounds_process import check_kernel_bounds
from .runtime.checks.sanitize import sanitize_kernel

__all__ = [
    "TensorDesc", "parse_tensor_arg", "Registry", "BoundKernel", "Engine", "Network",
    "InferRequest", "select_device",
    "list_devices", "describe_device", "load_configs", "load_config_string", "ConfigSet",
    "LayerSpec", "Diagnostic", "Diagnostics", "Location", "KernelLaunch", "Arg",
    "CustomLayersError", "ConfigError", "FormulaError", "DefineError", "TensorError",
    "KernelBuildError", "BindingError", "UnknownLayerError", "DeviceError", "ModelError",
    "ExecutionError", "KernelWriteError", "PythonLayerError", "InputFileError", "Attr", "cpu_layer",
    "check_kernel_bounds", "sanitize_kernel", "run_layer", "save_package", "PackageError",
]
