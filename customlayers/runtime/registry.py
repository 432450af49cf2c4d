"""Registry: custom layer types (loaded from configs) -> bound, compiled kernels.

`load`/`load_string` add layer descriptors; a load with any error changes nothing (it is staged
and committed only when clean). `bind` turns a layer type plus concrete tensors into a
BoundKernel, applying the binding rules of SPEC sections 2 and 5:

  * the kernel's tensors are jit/bindings.py `kernel_tensors` (the same function the `jit`
    command prints with): INPUTk = input port k, then the Data blobs (1-D, in arg order); each
    in its Tensor's format (the caller reorders; ANY as it comes); default outputs from the
    `shape` formula, else input 0's shape, input 0's type, no padding;
  * the compiled kernel's argument count must equal the bindings';
  * the local work size must be runnable on the device (limits.py).

`bind` is the one layer-compile pipeline: the network binds custom layers through it (via the
SimpleGPU adapter, simplegpu.py) and `validate --compile` calls it and turns its errors into
diagnostics. `implementation` gives the network's resolver the adapter of a layer type: the
SimpleGPU adapter (simplegpu.py) for a descriptor, the Python layer adapter (python_layer.py) for
a class loaded with `load_python` (python_loader.py), which replaces a descriptor of its type.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyopencl as cl

from ..config.diagnostics import Diagnostic, Diagnostics, Location, WARNING
from ..config.loader import ConfigSet, load_config_string, load_configs
from ..config.spec import LayerSpec
from ..errors import BindingError, CustomLayersError, KernelBuildError, UnknownLayerError
from ..jit.bindings import kernel_tensors
from ..jit.program import generate_program
from ..jit.tensor import TensorDesc
from .build import options_rejected
from .device import Engine
from .kernel import BoundKernel, data_descs_and_values
from .limits import check_kernel_work_group, check_local_size
from .python_layer import PythonLayer, PythonLayerDef
from .python_loader import load_python_layers
from .simplegpu import SimpleGpuLayer

# the codes of validate --compile (config/codes.py) for what each step of bind finds
PREPARE_CODE = "CL081"   # tensors, formulas, defines that do not work for these inputs
BUILD_CODE = "CL080"     # the compiler refuses the program, or the kernel's arguments differ
ENTRY_CODE = "CL044"     # the entry is not a kernel of the program


class Registry:
    """Custom layer types by name. The Engine (device, context, queue, program cache) is made
    on first use when none is given. `configs`: start from layers already loaded (the valid
    layers of a ConfigSet, as `validate` has them)."""

    def __init__(self, engine: Engine | None = None, configs: ConfigSet | None = None):
        self._engine = engine
        self._configs = configs if configs is not None else ConfigSet()
        self._python: dict[str, PythonLayerDef] = {}     # CPU layers in Python, by type

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine()
        return self._engine

    # -- loading -----------------------------------------------------------------------------
    def load(self, *paths, allow_external_sources: bool = False) -> Diagnostics:
        """Load config files. Returns this load's diagnostics (warnings, infos); raises
        ConfigError carrying every error, and then registers nothing from this call."""
        staged = self._staged()
        load_configs(list(paths), allow_external_sources=allow_external_sources, into=staged)
        return self._commit(staged)

    def load_string(self, xml: str | bytes, sources: Mapping[str, str] | None = None,
                    name: str = "<string>") -> Diagnostics:
        """Load a config from text; `sources` maps Source@filename to its text."""
        staged = self._staged()
        load_config_string(xml, sources or {}, name=name, into=staged)
        return self._commit(staged)

    def _staged(self) -> ConfigSet:
        # a copy to load into: the earlier definitions stay visible (for the "defined again"
        # warning) but nothing reaches the registry until the load is clean
        return ConfigSet(layers=dict(self._configs.layers), files=list(self._configs.files),
                         definitions=list(self._configs.definitions))

    def _commit(self, staged: ConfigSet) -> Diagnostics:
        staged.diagnostics.raise_if_errors()
        self._configs.layers = staged.layers
        self._configs.files = staged.files
        self._configs.definitions = staged.definitions
        self._configs.diagnostics.extend(staged.diagnostics)
        return staged.diagnostics

    def load_python(self, source) -> Diagnostics:
        """Load CPU layers in Python: `source` is a .py file or an imported module whose
        classes are registered with `@cpu_layer`. Returns warnings (a type defined again: the
        later definition wins); raises PythonLayerError (the user's traceback chained) when the
        module does not load or a class breaks the contract, and then registers nothing."""
        defs = load_python_layers(source)
        notes = Diagnostics()
        for defn in defs:
            earlier = self._python.get(defn.type)
            before = earlier.place if earlier is not None else (
                str(self.spec(defn.type).location) if defn.type in self._configs.layers
                else None)
            if before is not None:
                notes.add(Diagnostic(defn.file, defn.line, 1, WARNING, "CL070",
                                     f"layer type '{defn.type}' is defined again (first at "
                                     f"{before}); this later definition is used", defn.type))
        self._python.update({d.type: d for d in defs})
        return notes

    def python_layer(self, layer_type: str) -> PythonLayerDef:
        """The loaded Python layer of a type (UnknownLayerError listing them otherwise)."""
        try:
            return self._python[layer_type]
        except KeyError:
            known = ", ".join(sorted(self._python)) or "none loaded"
            raise UnknownLayerError(f"no Python layer of type '{layer_type}'; known: "
                                    f"{known}") from None

    def python_layer_types(self) -> list[str]:
        return sorted(self._python)

    @property
    def files(self) -> list[str]:
        return list(self._configs.files)

    # -- lookup ------------------------------------------------------------------------------
    def layer_types(self) -> list[str]:
        return sorted(set(self._configs.layers) | set(self._python))

    def location(self, layer_type: str) -> Location:
        """Where a loaded layer type is defined (its descriptor, or its Python class)."""
        defn = self._python.get(layer_type)
        if defn is not None:
            return Location(defn.file, defn.line)
        return self.spec(layer_type).location

    def spec(self, layer_type: str) -> LayerSpec:
        try:
            return self._configs.layers[layer_type]
        except KeyError:
            known = ", ".join(self.layer_types()) or "none loaded"
            raise UnknownLayerError(f"no custom layer of type '{layer_type}'; known: "
                                    f"{known}") from None

    def __contains__(self, layer_type: object) -> bool:
        return layer_type in self._configs.layers or layer_type in self._python

    def __len__(self) -> int:
        return len(self.layer_types())

    # -- implementations -----------------------------------------------------------------------
    def implementation(self, layer_type: str):
        """The layer implementation (jit.layer.LayerImpl) of a loaded layer type, for the
        network's resolver: an adapter over its Python class, or over its descriptor."""
        defn = self._python.get(layer_type)
        if defn is not None:
            return PythonLayer(defn)
        return SimpleGpuLayer(self.spec(layer_type), self)

    # -- binding: the one layer-compile pipeline -----------------------------------------------
    def bind(self, layer_type: str, inputs: Sequence[TensorDesc],
             outputs: Sequence[TensorDesc] | None = None, params: Mapping[str, str] = {},
             data: Mapping[str, np.ndarray] = {}) -> BoundKernel:
        """Compile `layer_type` for these tensors and attributes into a checked BoundKernel; see
        the module docstring. Running a layer and `validate --compile` both come through here:
        every error carries the descriptor's place (`location`, `code`) for the CLI's
        diagnostics."""
        spec = self.spec(layer_type)
        try:
            data_descs, data_values = data_descs_and_values(spec, data)
            all_inputs, kernel_outputs = kernel_tensors(spec, inputs, outputs, data_descs)
            source = generate_program(spec, all_inputs, kernel_outputs,
                                      {k: str(v) for k, v in params.items()})
        except CustomLayersError as e:    # what the tensors and attributes cannot give
            raise e.at(spec.location, PREPARE_CODE, spec.name)
        engine = self.engine
        check_local_size(spec, source.global_size, source.local_size, engine.device)
        try:
            program, warnings = engine.cache.build_with_warnings(
                engine.context, engine.device, source.text, source.options,
                line_map=source.line_map, label=spec.name)
        except KernelBuildError as e:
            if options_rejected(e):
                e.options_rejected = True
                raise e.at(spec.compiler_options_location or spec.location, BUILD_CODE,
                           spec.name)
            raise e.at(spec.location, BUILD_CODE, spec.name)
        kernel = entry_kernel(spec, program)
        check_argument_count(spec, kernel)
        check_kernel_work_group(spec, source.local_size, kernel, engine.device)
        bound = BoundKernel(spec, all_inputs[:spec.num_input_ports], kernel_outputs, data_descs,
                            data_values, source, program, kernel, engine)
        bound.build_warnings = warnings
        return bound


def entry_kernel(spec: LayerSpec, program: cl.Program) -> cl.Kernel:
    try:
        return cl.Kernel(program, spec.entry)
    except cl.Error:
        names = program.get_info(cl.program_info.KERNEL_NAMES) or ""
        found = ", ".join(n for n in names.split(";") if n) or "none"
        raise BindingError(f"layer type '{spec.name}': entry '{spec.entry}' "
                           f"({spec.location}) is not a kernel of its sources; kernels found: "
                           f"{found}").at(spec.location, ENTRY_CODE, spec.name) from None


def check_argument_count(spec: LayerSpec, kernel: cl.Kernel) -> None:
    have = kernel.num_args
    want = spec.num_args
    if have != want:
        bound = ", ".join(f"{i}" for i in sorted(
            [t.arg_index for t in spec.tensors] + [d.arg_index for d in spec.data]))
        raise BindingError(f"layer type '{spec.name}' ({spec.location}): kernel '{spec.entry}' "
                           f"takes {have} argument{'s' if have != 1 else ''} but the descriptor "
                           f"binds {want} (Tensor and Data arg-index {bound})"
                           ).at(spec.location, BUILD_CODE, spec.name)
