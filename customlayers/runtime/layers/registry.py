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

`bind` is SimpleGPU's entry into the one layer-compile pipeline (its program from jit/program.py,
built and checked by build.py's build_layer_kernel, as each MVCL stage is by mvcl_build.py): the
network binds custom layers through it (via the SimpleGPU adapter, simplegpu.py) and `validate
--compile` calls it and turns its errors into diagnostics. `implementation` gives the network's resolver the adapter of a layer type: the
SimpleGPU adapter (simplegpu.py) for a descriptor, the Python layer adapter (python_layer.py) for
a class loaded with `load_python` (python_loader.py), which replaces a descriptor of its type.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

import numpy as np
import pyopencl as cl

from ...config.diagnostics import Diagnostic, Diagnostics, Location, WARNING
from ...config.loader import ConfigSet, load_config_string, load_configs
from ...config.simplegpu.params import unused_params, unused_params_message
from ...config.simplegpu.spec import LayerSpec
from ...errors import BindingError, CustomLayersError, UnknownLayerError
from ...jit.bindings import kernel_tensors
from ...jit.program import generate_program
from ...jit.tensor import TensorDesc
from ..device.build import BUILD_CODE, PREPARE_CODE, build_layer_kernel
from ..device.device import Engine
from ..device.device_memory import check_fits
from ..execute.kernel import BoundKernel, data_descs_and_values, kernel_buffers
from .layer_shapes import layer_output_shapes
from ..device.limits import check_local_size
from .dialects import dialect_of, runtime_of
from ..compile.one_layer import run_layer
from .python_layer import PythonLayer, PythonLayerDef
from .python_loader import load_python_layers

# the codes of validate --compile (config/codes.py) for what bind finds beside the steps every
# dialect shares (build.py: PREPARE_CODE, BUILD_CODE, ENTRY_CODE)
QUALIFIER_CODE = "CL084"  # a kernel parameter cannot take what is bound to it
HALF_CODE = "CL085"      # the program computes in half on a device without cl_khr_fp16

# Custom layers are built with the kernel's argument info kept, so that binding can check what
# each parameter is declared as (drivers other than PoCL drop it without this option).
KERNEL_ARG_INFO = "-cl-kernel-arg-info"


def kernel_build_options(user_options: str) -> str:
    return f"{user_options} {KERNEL_ARG_INFO}".strip()


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

    @engine.setter
    def engine(self, engine: Engine) -> None:
        """The device to bind on; configs can be loaded before it is chosen."""
        self._engine = engine

    @property
    def made_engine(self) -> Engine | None:
        """The engine, if one was given or made already (None: it would be made on first
        use)."""
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
    def configs(self) -> ConfigSet:
        """What is loaded: every layer, definition and file (read it, do not change it)."""
        return self._configs

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
        network's resolver: an adapter over its Python class, or the adapter of its kind over
        its descriptor."""
        defn = self._python.get(layer_type)
        if defn is not None:
            return PythonLayer(defn)
        spec = self.spec(layer_type)
        dialect = runtime_of(spec)
        if dialect is None:
            raise BindingError(f"layer type '{layer_type}' ({spec.location}) is an {spec.kind} "
                               f"layer, which this version cannot run yet")
        return dialect.adapter()(spec, self)

    def output_shapes(self, layer_type: str, domain: str, attrs: Mapping[str, str],
                      input_shapes: Sequence[tuple], *, input_names: Sequence[str] = (),
                      constant_inputs: Sequence[int] = (), output_count: int | None = None,
                      where: str | None = None) -> list[tuple | None] | None:
        """The output shapes of a loaded layer for inputs of these shapes, by its
        implementation's own rules (SimpleGPU: the Tensor shape formula, else input 0's shape),
        for a model reader (graph/custom_shapes.py): None when the type is not loaded; a
        CustomLayersError saying why when its rules give none. Dims may be symbolic names or
        None (a dynamic batch) and come back so where they pass through; `input_names` and
        `constant_inputs` say which inputs are constants (the <Data> blobs bind to those);
        layer_shapes.py says how."""
        if layer_type not in self:
            return None
        return layer_output_shapes(self.implementation(layer_type), layer_type, attrs,
                                   input_shapes, input_names, constant_inputs, output_count,
                                   where)

    def run_layer(self, layer_type: str, inputs: Sequence[np.ndarray],
                  params: Mapping[str, str] | None = None,
                  data: Mapping[str, np.ndarray] | None = None,
                  output_shapes: Sequence[Sequence[int]] | None = None) -> list[np.ndarray]:
        """Run a loaded layer of any kind alone on numpy arrays, through a one-layer network
        (one_layer.py): the outputs as a list. `output_shapes` declares the outputs (required
        for an MVCL layer, which has no shape formula)."""
        return run_layer(self, layer_type, inputs, params, data, output_shapes)

    # -- binding: the one layer-compile pipeline -----------------------------------------------
    def bind(self, layer_type: str, inputs: Sequence[TensorDesc],
             outputs: Sequence[TensorDesc] | None = None, params: Mapping[str, str] = {},
             data: Mapping[str, np.ndarray] = {}, *, strict_params: bool = True) -> BoundKernel:
        """Compile `layer_type` for these tensors and attributes into a checked BoundKernel; see
        the module docstring. `strict_params`: a parameter no Define reads is an error (the
        network passes a model's attributes, which may hold others, with False). Running a layer
        and `validate --compile` both come through here:
        every error carries the descriptor's place (`location`, `code`) for the CLI's
        diagnostics."""
        spec = self.spec(layer_type)
        if not dialect_of(spec).one_kernel:
            raise BindingError(f"layer type '{layer_type}' ({spec.location}) is an {spec.kind} "
                               f"layer: bind takes SimpleGPU layers (one kernel); run it alone "
                               f"with run_layer, or in a network")
        if strict_params:      # a parameter no Define reads would run the default: refuse it
            unused = unused_params(spec, params)
            if unused:
                raise BindingError(unused_params_message(spec, unused)).at(
                    spec.location, PREPARE_CODE, spec.name)
        try:
            data_descs, data_values = data_descs_and_values(spec, data)
            all_inputs, kernel_outputs = kernel_tensors(spec, inputs, outputs, data_descs,
                                                        params)
            source = generate_program(spec, all_inputs, kernel_outputs,
                                      {k: str(v) for k, v in params.items()})
        except CustomLayersError as e:    # what the tensors and attributes cannot give
            raise e.at(spec.location, PREPARE_CODE, spec.name)
        engine = self.engine
        try:   # a bound kernel run alone allocates these at once (device_memory.py)
            check_fits(engine.device, kernel_buffers(all_inputs[:spec.num_input_ports],
                                                     kernel_outputs, spec.data_in_arg_order,
                                                     data_descs),
                       f"layer '{spec.name}' (its inputs, outputs and Data)",
                       advice="give smaller shapes")
        except CustomLayersError as e:
            raise e.at(spec.location, PREPARE_CODE, spec.name)
        check_local_size(spec, source.global_size, source.local_size, engine.device)
        check_half_support(spec, source.text, all_inputs + kernel_outputs, engine.device)
        options = kernel_build_options(source.options)

        def check_kernel(kernel: cl.Kernel) -> None:
            check_argument_count(spec, kernel)
            check_argument_qualifiers(spec, kernel)

        built = build_layer_kernel(engine, spec, source, options, who=f"layer type '{spec.name}'",
                                   location=spec.location, label=spec.name,
                                   options_location=spec.compiler_options_location
                                   or spec.location, check_kernel=check_kernel)
        bound = BoundKernel(spec, all_inputs[:spec.num_input_ports], kernel_outputs, data_descs,
                            data_values, source, built.program, built.kernel, engine, options)
        bound.build_warnings = built.warnings
        return bound


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


_GLOBAL = cl.kernel_arg_address_qualifier.GLOBAL
_CONSTANT = cl.kernel_arg_address_qualifier.CONSTANT
_CONST = cl.kernel_arg_type_qualifier.CONST


def check_argument_qualifiers(spec: LayerSpec, kernel: cl.Kernel) -> None:
    """Every tensor and Data blob is bound to a pointer parameter of global (or, read-only,
    constant) memory, and an output never to a const one: with input and output arg-index
    swapped, the kernel would read the output and write nothing, and the layer would return
    garbage. Skipped where the driver keeps no argument info."""
    slots = [(t.arg_index, t.kind, f"{t.kind} port {t.port_index}", t.location)
             for t in spec.tensors]
    slots += [(d.arg_index, "input", f"Data '{d.name}'", d.location) for d in spec.data]
    info = cl.kernel_arg_info
    for index, kind, what, location in sorted(slots, key=lambda s: s[0]):
        try:
            address = kernel.get_arg_info(index, info.ADDRESS_QUALIFIER)
            qualifiers = kernel.get_arg_info(index, info.TYPE_QUALIFIER)
            type_name = kernel.get_arg_info(index, info.TYPE_NAME).strip()
            name = kernel.get_arg_info(index, info.NAME)
        except cl.Error:
            return
        declared = (f"argument {index} '{name}' of kernel '{spec.entry}', which is declared "
                    f"{_declaration(address, qualifiers, type_name)}")
        problem = None
        if not type_name.endswith("*"):
            problem = "it is not a pointer"
        elif kind == "output" and address != _GLOBAL:
            problem = "an output must be a __global pointer the kernel writes"
        elif kind == "output" and qualifiers & _CONST:
            problem = "the kernel cannot write through a const pointer"
        elif address not in (_GLOBAL, _CONSTANT):
            problem = "a tensor is a __global (or __constant) pointer"
        if problem:
            hint = (" (are the arg-index of an input and an output swapped?)"
                    if kind == "output" and qualifiers & _CONST else "")
            raise BindingError(f"layer type '{spec.name}' ({location}): the descriptor binds "
                               f"{what} to {declared}: {problem}{hint}"
                               ).at(location, QUALIFIER_CODE, spec.name)


def _declaration(address: int, qualifiers: int, type_name: str) -> str:
    space = {int(_GLOBAL): "__global", int(_CONSTANT): "__constant",
             int(cl.kernel_arg_address_qualifier.LOCAL): "__local"}.get(int(address), "")
    const = "const " if qualifiers & _CONST else ""
    return f"'{' '.join(p for p in (space, const + type_name) if p)}'"


_HALF_TOKEN = re.compile(r"\bhalf\d*\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def check_half_support(spec: LayerSpec, text: str, tensors, device: cl.Device) -> None:
    """A program that computes in half (an f16 tensor, or `half` in its sources) needs
    cl_khr_fp16: say so before the compiler does, in its own words."""
    if "cl_khr_fp16" in device.extensions.split():
        return
    uses = [f"tensor type {d.dtype}" for d in tensors if d.dtype == "f16"]
    if not uses and any(_HALF_TOKEN.search(_COMMENT.sub(" ", s.text)) for s in spec.sources):
        uses = ["its sources use the half type"]
    if uses:
        raise BindingError(f"layer type '{spec.name}' ({spec.location}): {uses[0]}, which needs "
                           f"half precision (cl_khr_fp16); device '{device.name.strip()}' has "
                           f"none. Run it in float (f32 tensors, float in the kernel) or on a "
                           f"device with fp16").at(spec.location, HALF_CODE, spec.name)
