"""Registry: custom layer types (loaded from configs) -> bound, compiled kernels.

`load`/`load_string` add layer descriptors; a load with any error changes nothing (it is staged
and committed only when clean). `bind` turns a layer type plus concrete tensors into a
BoundKernel, applying the binding rules of SPEC sections 2 and 5:

  * the kernel's tensors are jit/bindings.py `kernel_tensors` (the same function the `jit`
    command prints with): INPUTk = input port k, then the Data blobs (1-D, in arg order); each
    in its Tensor's format (the caller reorders; ANY as it comes); default outputs from the
    `shape` formula, else input 0's shape, input 0's type, no padding;
  * the compiled kernel's argument count must equal the bindings';
  * the local work size must be runnable on the device.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyopencl as cl

from ..config.diagnostics import Diagnostics
from ..config.loader import ConfigSet, load_config_string, load_configs
from ..config.spec import LayerSpec
from ..errors import BindingError, FormulaError, UnknownLayerError
from ..jit.bindings import kernel_tensors
from ..jit.tensor import TensorDesc
from .kernel import BoundKernel, data_descs_and_values


class Registry:
    """Custom layer types by name. The Engine (device, context, queue, program cache) is made
    on first use when none is given."""

    def __init__(self, engine=None):
        self._engine = engine
        self._configs = ConfigSet()

    @property
    def engine(self):
        if self._engine is None:
            from .device import Engine
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

    @property
    def files(self) -> list[str]:
        return list(self._configs.files)

    # -- lookup ------------------------------------------------------------------------------
    def layer_types(self) -> list[str]:
        return sorted(self._configs.layers)

    def spec(self, layer_type: str) -> LayerSpec:
        try:
            return self._configs.layers[layer_type]
        except KeyError:
            known = ", ".join(self.layer_types()) or "none loaded"
            raise UnknownLayerError(f"no custom layer of type '{layer_type}'; known: "
                                    f"{known}") from None

    def __contains__(self, layer_type: object) -> bool:
        return layer_type in self._configs.layers

    def __len__(self) -> int:
        return len(self._configs.layers)

    # -- binding -----------------------------------------------------------------------------
    def bind(self, layer_type: str, inputs: Sequence[TensorDesc],
             outputs: Sequence[TensorDesc] | None = None, params: Mapping[str, str] = {},
             data: Mapping[str, np.ndarray] = {}) -> BoundKernel:
        """Compile `layer_type` for these tensors and attributes; see the module docstring."""
        from ..jit.program import generate_program
        spec = self.spec(layer_type)
        data_descs, data_values = data_descs_and_values(spec, data)
        all_inputs, kernel_outputs = kernel_tensors(spec, inputs, outputs, data_descs)
        kernel_inputs = all_inputs[:spec.num_input_ports]
        try:
            source = generate_program(spec, all_inputs, kernel_outputs,
                                      {k: str(v) for k, v in params.items()})
        except FormulaError as e:
            if not e.layer:
                e.layer = spec.name
            raise
        engine = self.engine
        check_local_size(spec, source.global_size, source.local_size, engine.device)
        program = engine.cache.build(engine.context, engine.device, source.text, source.options,
                                     line_map=source.line_map, label=spec.name)
        kernel = entry_kernel(spec, program)
        check_argument_count(spec, kernel)
        check_kernel_work_group(spec, source.local_size, kernel, engine.device)
        return BoundKernel(spec, kernel_inputs, kernel_outputs, data_descs, data_values, source,
                           program, kernel, engine)


def entry_kernel(spec: LayerSpec, program: cl.Program) -> cl.Kernel:
    try:
        return cl.Kernel(program, spec.entry)
    except cl.Error:
        names = program.get_info(cl.program_info.KERNEL_NAMES) or ""
        found = ", ".join(n for n in names.split(";") if n) or "none"
        raise BindingError(f"layer type '{spec.name}': entry '{spec.entry}' "
                           f"({spec.location}) is not a kernel of its sources; kernels found: "
                           f"{found}") from None


def check_argument_count(spec: LayerSpec, kernel: cl.Kernel) -> None:
    have = kernel.num_args
    want = spec.num_args
    if have != want:
        bound = ", ".join(f"{i}" for i in sorted(
            [t.arg_index for t in spec.tensors] + [d.arg_index for d in spec.data]))
        raise BindingError(f"layer type '{spec.name}' ({spec.location}): kernel '{spec.entry}' "
                           f"takes {have} argument(s) but the descriptor binds {want} "
                           f"(arg-index {bound})")


# -- what the device can run ---------------------------------------------------------------
def supports_non_uniform_groups(device: cl.Device) -> bool:
    """OpenCL 2.x always allows a last, smaller work-group; 3.0 makes it optional and says so
    in a device query; 1.x never allows it."""
    try:
        major = int(device.version.split()[1].split(".")[0])
    except (IndexError, ValueError):
        return False
    if major < 2:
        return False
    try:
        return bool(device.non_uniform_work_group_support)
    except (AttributeError, cl.Error):
        return major == 2


def check_local_size(spec: LayerSpec, global_size: Sequence[int],
                     local_size: Sequence[int] | None, device: cl.Device) -> None:
    """BindingError when the device cannot run this local size, naming layer, formula, values."""
    if not local_size:
        return
    formula = ",".join(spec.work_sizes.local or ())
    where = (f"layer type '{spec.name}' ({spec.work_sizes.location}): local=\"{formula}\" "
             f"gives {list(local_size)} for global {list(global_size)}")
    device_name = device.name.strip()
    total = 1
    for v in local_size:
        total *= v
    if total > device.max_work_group_size:
        raise BindingError(f"{where}: {total} work items per group, but device '{device_name}' "
                           f"allows at most {device.max_work_group_size}")
    limits = device.max_work_item_sizes
    for i, (v, lim) in enumerate(zip(local_size, limits)):
        if v > lim:
            raise BindingError(f"{where}: local[{i}]={v} is over device '{device_name}''s limit "
                               f"{lim} for dimension {i}")
    if not supports_non_uniform_groups(device):
        for i, (g, v) in enumerate(zip(global_size, local_size)):
            if g % v:
                rounded = _rounded_up(_global_formula(spec, i, g), v)
                raise BindingError(
                    f"{where}: local[{i}]={v} does not divide global[{i}]={g}, and device "
                    f"'{device_name}' ({device.version.strip()}) needs uniform work-groups; "
                    f"round the global size up (e.g. {rounded}) and guard the extra "
                    "work items in the kernel")


def _global_formula(spec: LayerSpec, i: int, value: int) -> str:
    """The text of global entry i: as written, or what the default global stands for."""
    written = spec.work_sizes.global_
    if written is not None and i < len(written):
        return written[i].strip()
    if written is None and spec.work_sizes.dim == ("output", 0):
        return "B*F*Y*X"      # the default: output 0's element count, and dim is output 0
    return str(value)


def _rounded_up(formula: str, v: int) -> str:
    term = formula if formula.isalnum() else f"({formula})"
    return f"({term}+{v - 1})/{v}*{v}"


def check_kernel_work_group(spec: LayerSpec, local_size: Sequence[int] | None,
                            kernel: cl.Kernel, device: cl.Device) -> None:
    """The compiled kernel may allow fewer work items per group than the device (registers,
    local memory): check that too once it is built."""
    if not local_size:
        return
    limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
    total = 1
    for v in local_size:
        total *= v
    if total > limit:
        formula = ",".join(spec.work_sizes.local or ())
        raise BindingError(f"layer type '{spec.name}' ({spec.work_sizes.location}): "
                           f"local=\"{formula}\" gives {total} work items per group, but "
                           f"kernel '{spec.entry}' allows at most {limit} on device "
                           f"'{device.name.strip()}'")
