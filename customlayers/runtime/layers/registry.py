"""Registry: the catalog of loaded layer types (descriptors from configs, Python layers) on the
engine chosen when it is made, and the one layer-compile pipeline that binds them.

`load`/`load_string` add layer descriptors; a load with any error changes nothing (it is staged
and committed only when clean). `bind` turns a layer type plus concrete tensors into a
BoundKernel, applying the binding rules of SPEC sections 2 and 5:

  * the kernel's tensors are jit/bindings.py `kernel_tensors` (the same function the `jit`
    command prints with): INPUTk = input port k, then the Data blobs (1-D, in arg order); each
    in its Tensor's format (the caller reorders; ANY as it comes); default outputs from the
    `shape` formula, else input 0's shape, input 0's type, no padding;
  * the compiled kernel's argument count must equal the bindings';
  * the local work size must be runnable on the device (limits.py).

`bind` is SimpleGPU's entry into the one layer-compile pipeline (as mvcl_build.py is each MVCL
stage's), in two halves around the build (device/build.py's build_layer_kernel, the build step
of either dialect): `prepare` (tensors, program text, options, the checks that need no compiled
kernel) and `finish` (device/build.py's finish_layer_kernel with SimpleGPU's checks of the
kernel, then the BoundKernel). `validate --compile` and scripts call `bind`; a network calls the
halves through the SimpleGPU adapter (simplegpu.py), so that its compiler builds the custom
layers' programs in the same parallel batch as the built-ins'. `implementation` gives the
network's resolver the adapter of a layer type: the SimpleGPU adapter (simplegpu.py) for a
descriptor, the Python layer adapter (python_layer.py) for a class loaded with `load_python`
(python_loader.py), which replaces a descriptor of its type. Running one layer alone is above the
catalog: compile/one_layer.py `run_layer(registry, ...)`. OpenCL is read through device/ only
(kernel_info.py: kernel names, parameter declarations).
"""
from __future__ import annotations

import re
import warnings
from typing import Mapping, Sequence

import numpy as np

from ...config.diagnostics import Diagnostic, Diagnostics, Location, WARNING
from ...config.loader import ConfigSet, load_config_string, load_configs
from ...config.simplegpu.params import unused_params, unused_params_message
from ...config.simplegpu.spec import LayerSpec
from ...errors import (BindingError, CustomLayersError, LayerRedefinedWarning,
                      UnknownLayerError)
from ...jit.bindings import kernel_tensors
from ...jit.program import generate_program
from ...jit.tensor import TensorDesc
from ..device.build import BUILD_CODE, PREPARE_CODE, build_layer_kernel, finish_layer_kernel
from ..device.device import Engine
from ..device.device_memory import check_fits
from ..device.kernel_info import CONSTANT, GLOBAL, param_declaration
from ..execute.kernel import BoundKernel, data_descs_and_values, kernel_buffers
from .layer_shapes import layer_output_shapes
from ..device.limits import check_local_size
from .dialects import dialect_of, runtime_of
from .prepared_kernel import PreparedKernel
from .python_layer import PythonLayer, PythonLayerDef
from .python_loader import load_python_layers

# the codes of validate --compile (config/codes.py) for what each step of bind finds
QUALIFIER_CODE = "CL084"  # a kernel parameter cannot take what is bound to it
HALF_CODE = "CL085"      # the program computes in half on a device without cl_khr_fp16

# Custom layers are built with the kernel's argument info kept, so that binding can check what
# each parameter is declared as (drivers other than PoCL drop it without this option).
KERNEL_ARG_INFO = "-cl-kernel-arg-info"


def kernel_build_options(user_options: str) -> str:
    return f"{user_options} {KERNEL_ARG_INFO}".strip()


class Registry:
    """Custom layer types by name, and the Engine (device, context, queue, program cache) they
    are bound on, chosen when the registry is made: `engine`, else one on the default device
    made now. It cannot be changed after (a network refuses a registry of another engine).
    `configs`: start from layers already loaded (the valid layers of a ConfigSet, as `validate`
    has them)."""

    def __init__(self, engine: Engine | None = None, configs: ConfigSet | None = None):
        self._engine = engine if engine is not None else Engine()
        self._configs = configs if configs is not None else ConfigSet()
        self._python: dict[str, PythonLayerDef] = {}     # CPU layers in Python, by type

    @property
    def engine(self) -> Engine:
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        raise AttributeError("a Registry's engine is chosen when it is made: "
                             "Registry(engine), not set after")

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
        _warn_redefined(staged.diagnostics)     # first: a warning made an error loads nothing
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
        _warn_redefined(notes)                  # first: a warning made an error loads nothing
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

    # -- binding: the one layer-compile pipeline -----------------------------------------------
    def bind(self, layer_type: str, inputs: Sequence[TensorDesc],
             outputs: Sequence[TensorDesc] | None = None, params: Mapping[str, str] = {},
             data: Mapping[str, np.ndarray] = {}, *, strict_params: bool = True) -> BoundKernel:
        """Compile `layer_type` for these tensors and attributes into a checked BoundKernel; see
        the module docstring. `strict_params`: a parameter no Define reads is an error (the
        network passes a model's attributes, which may hold others, with False). Running a layer
        and `validate --compile` both come through here:
        every error carries the descriptor's place (`location`, `code`) for the CLI's
        diagnostics. It is `prepare`, the build, and `finish`; a network builds between the two
        halves, every program of the network in one batch."""
        prepared = self.prepare(layer_type, inputs, outputs, params, data,
                                strict_params=strict_params)
        spec = prepared.spec
        built = build_layer_kernel(self._engine, spec, prepared.source, prepared.options,
                                   who=f"layer type '{spec.name}'", location=spec.location,
                                   label=spec.name, options_location=_options_location(spec),
                                   check_kernel=_kernel_checks(spec))
        bound = self._bound(prepared, built.program, built.kernel)
        bound.build_warnings = built.warnings
        return bound

    def prepare(self, layer_type: str, inputs: Sequence[TensorDesc],
                outputs: Sequence[TensorDesc] | None = None, params: Mapping[str, str] = {},
                data: Mapping[str, np.ndarray] = {}, *,
                strict_params: bool = True) -> PreparedKernel:
        """The first half of `bind`: the kernel's tensors, its program text and build options,
        and the checks that need no compiled kernel (parameters, memory, local size, half)."""
        # one TensorDesc is a list of one (a layer of one input or output)
        inputs = [inputs] if isinstance(inputs, TensorDesc) else inputs
        outputs = [outputs] if isinstance(outputs, TensorDesc) else outputs
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
        device = self._engine.device
        try:   # a bound kernel run alone allocates these at once (device_memory.py)
            check_fits(device, kernel_buffers(all_inputs[:spec.num_input_ports],
                                              kernel_outputs, spec.data_in_arg_order,
                                              data_descs),
                       f"layer '{spec.name}' (its inputs, outputs and Data)",
                       advice="give smaller shapes")
        except CustomLayersError as e:
            raise e.at(spec.location, PREPARE_CODE, spec.name)
        check_local_size(spec, source.global_size, source.local_size, device)
        check_half_support(spec, source.text, all_inputs + kernel_outputs, device)
        return PreparedKernel(spec, tuple(all_inputs[:spec.num_input_ports]),
                              tuple(kernel_outputs), tuple(data_descs), tuple(data_values),
                              source, kernel_build_options(source.options))

    def finish(self, prepared: PreparedKernel, program) -> BoundKernel:
        """The second half of `bind`: the checks of the built program's kernel (it is the
        entry, takes the descriptor's arguments, declared as they are bound, and allows the
        local size), and the BoundKernel. `program`: `prepared` built on this registry's
        engine, or the KernelBuildError its build raised (raised here, at the descriptor)."""
        spec = prepared.spec
        kernel = finish_layer_kernel(self._engine, spec, prepared.source, program,
                                     who=f"layer type '{spec.name}'", location=spec.location,
                                     options_location=_options_location(spec),
                                     check_kernel=_kernel_checks(spec))
        return self._bound(prepared, program, kernel)

    def _bound(self, prepared: PreparedKernel, program, kernel) -> BoundKernel:
        return BoundKernel(prepared.spec, prepared.inputs, prepared.outputs, prepared.data_descs,
                           prepared.data_values, prepared.source, program, kernel,
                           self._engine, prepared.options)


def _options_location(spec: LayerSpec):
    """Where a build refused for its options is reported: the descriptor's CompilerOptions."""
    return spec.compiler_options_location or spec.location


def _kernel_checks(spec: LayerSpec):
    """SimpleGPU's checks of a compiled kernel (the build step runs them): the descriptor's
    argument count and how each bound parameter is declared."""
    def check(kernel) -> None:
        check_argument_count(spec, kernel)
        check_argument_qualifiers(spec, kernel)
    return check


def check_argument_count(spec: LayerSpec, kernel) -> None:
    have = kernel.num_args
    want = spec.num_args
    if have != want:
        bound = ", ".join(f"{i}" for i in sorted(
            [t.arg_index for t in spec.tensors] + [d.arg_index for d in spec.data]))
        # at the first binding, inside <Buffers>, where the arg-index values are
        bindings = [b.location for b in (*spec.tensors, *spec.data)]
        where = min(bindings, key=lambda loc: (loc.line, loc.column)) if bindings \
            else spec.location
        raise BindingError(f"layer type '{spec.name}' ({where}): kernel '{spec.entry}' "
                           f"takes {have} argument{'s' if have != 1 else ''} but the descriptor "
                           f"binds {want} (Tensor and Data arg-index {bound})"
                           ).at(where, BUILD_CODE, spec.name)


def check_argument_qualifiers(spec: LayerSpec, kernel) -> None:
    """Every tensor and Data blob is bound to a pointer parameter of global (or, read-only,
    constant) memory, and an output never to a const one: with input and output arg-index
    swapped, the kernel would read the output and write nothing, and the layer would return
    garbage. Skipped where the driver keeps no argument info."""
    slots = [(t.arg_index, t.kind, f"{t.kind} port {t.port_index}", t.location)
             for t in spec.tensors]
    slots += [(d.arg_index, "input", f"Data '{d.name}'", d.location) for d in spec.data]
    for index, kind, what, location in sorted(slots, key=lambda s: s[0]):
        param = param_declaration(kernel, index)
        if param is None:
            return
        declared = (f"argument {index} '{param.name}' of kernel '{spec.entry}', which is "
                    f"declared {param.describe()}")
        problem = None
        if not param.type_name.endswith("*"):
            problem = "it is not a pointer"
        elif kind == "output" and param.address != GLOBAL:
            problem = "an output must be a __global pointer the kernel writes"
        elif kind == "output" and param.const:
            problem = "the kernel cannot write through a const pointer"
        elif param.address not in (GLOBAL, CONSTANT):
            problem = "a tensor is a __global (or __constant) pointer"
        if problem:
            hint = (" (are the arg-index of an input and an output swapped?)"
                    if kind == "output" and param.const else "")
            raise BindingError(f"layer type '{spec.name}' ({location}): the descriptor binds "
                               f"{what} to {declared}: {problem}{hint}"
                               ).at(location, QUALIFIER_CODE, spec.name)


_HALF_TOKEN = re.compile(r"\bhalf\d*\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def check_half_support(spec: LayerSpec, text: str, tensors, device) -> None:
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


def _warn_redefined(diagnostics: Diagnostics) -> None:
    """Each CL070 (a layer type defined again: the later definition replaces the earlier) as a
    LayerRedefinedWarning too: Registry.load replaced a layer silently for an API user who did
    not read the diagnostics it returns (a new user's trial)."""
    for d in diagnostics:
        if d.code == "CL070":
            warnings.warn(LayerRedefinedWarning(d.render()), stacklevel=3)
