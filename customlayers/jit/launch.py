"""KernelLaunch: one kernel enqueue of a layer, as data; HostWork: a step the host does between
kernels (Python layers); and the typed facts a layer is compiled
with (CompileContext: the device's traits, a fused epilogue).

Custom layers (a BoundKernel) and built-in ops both describe their work as a list of these, so
the executor treats them alike: it builds `source` with `options` through the program cache,
binds `args`, and enqueues `entry` over `global_size`/`local_size`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

import numpy as np

from .cl_includes import directive_line_map

if TYPE_CHECKING:
    from .variant import KernelVariant

T = TypeVar("T")


@dataclass(frozen=True)
class Arg:
    """One kernel argument.

    kind:
      "input"   -- the layer's input tensor `index` (its buffer as the executor holds it)
      "output"  -- the layer's output tensor `index`
      "const"   -- a constant array `value` (uploaded once per network, shared by requests)
      "scratch" -- a temporary device buffer of `nbytes` bytes, private to this launch chain of
                   the layer (`index` names it, so two launches of one layer can share one)
      "scalar"  -- a numpy scalar `value` (np.int32, np.float32, ...) passed by value
      "local"   -- __local memory of `nbytes` bytes
      "state_flag" -- an int (0 or 1) the request sets before each run: whether the state
                   `value` (a variable id) holds what an earlier run or set_state wrote (1), or
                   was reset since (0); bound alone (a launch tried outside a request), 0
    """
    kind: str
    index: int = 0
    value: object = None
    nbytes: int = 0

    @staticmethod
    def input(i: int) -> "Arg":
        return Arg("input", i)

    @staticmethod
    def output(i: int) -> "Arg":
        return Arg("output", i)

    @staticmethod
    def const(array: np.ndarray) -> "Arg":
        return Arg("const", value=np.ascontiguousarray(array))

    @staticmethod
    def scratch(index: int, nbytes: int) -> "Arg":
        return Arg("scratch", index=index, nbytes=int(nbytes))

    @staticmethod
    def scalar(value) -> "Arg":
        return Arg("scalar", value=value)

    @staticmethod
    def local(nbytes: int) -> "Arg":
        return Arg("local", nbytes=int(nbytes))

    @staticmethod
    def state_flag(variable: str) -> "Arg":
        return Arg("state_flag", value=variable)


@dataclass(frozen=True)
class KernelLaunch:
    source: str                          # complete OpenCL C program text
    entry: str                           # kernel function name
    args: tuple[Arg, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None = None
    options: str = ""                    # build options
    label: str = ""                      # for messages and profiles, e.g. "conv2d_3x3"
    line_map: tuple = field(default=(), compare=False)  # generated line -> (file, line), for errors

    def __post_init__(self):
        if not self.line_map:        # a built-in op's program: its #line directives say it
            object.__setattr__(self, "line_map", directive_line_map(self.source))


@dataclass(frozen=True)
class HostWork:
    """Work a layer does on the host at its place in the network (a Python CPU layer, or the
    check of a custom layer against its Python reference), as data next to KernelLaunch.

    `run(inputs, outputs)` gets the stage's inputs as dense read-only numpy arrays (logical
    shapes) and fills `outputs`, dense arrays of the stage's output tensors, in place. The
    executor maps the inputs after the kernels before it, calls `run` in a worker thread, and
    only then releases the kernels after it (by an event): the host that enqueues never waits.
    """
    run: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None]
    label: str = ""                      # for messages and profiles, e.g. "Softsign.execute"
    # what rebuilds `run` in another process, as data (a compiled package holds no code:
    # runtime/package/host_layers.py): ("python", layer type, class name, file name, parsed
    # attributes as sorted (name, value) pairs, the node described) for a Python layer; ()
    # for host work that cannot be rebuilt (a reference check)
    origin: tuple = field(default=(), compare=False)


@dataclass(frozen=True)
class DeviceTraits:
    """What an implementation may know of the device when it chooses its kernels (runtime/device/limits.py
    reads them off the device). Launches stay plain data; only the choice depends on this."""
    kind: str = "GPU"                 # "GPU" | "CPU" | "ACCELERATOR"
    compute_units: int = 128
    max_work_group_size: int = 256
    float_vector_width: int = 8       # preferred float vector width (8: AVX2, 16: AVX-512)
    # CL_DEVICE_LOCAL_MEM_SIZE in bytes (NVIDIA 48 KB); the default is OpenCL 1.2's minimum
    local_mem_size: int = 32 * 1024
    global_cache_bytes: int = 0       # CL_DEVICE_GLOBAL_MEM_CACHE_SIZE (0: not known)
    # copies from global to __local memory without registers (PTX cp.async: NVIDIA's platform,
    # compute capability 8.0 and later): gemm_async.cl's pipeline
    async_copy: bool = False


@dataclass(frozen=True)
class FusedEpilogue:
    """What the network compiler fused into a layer that declares `accepts_epilogue`: a
    per-channel bias (then the layer's input after its own), a residual tensor of the output's
    shape added after the bias (then the layer's last input: the other side of a residual Add),
    and/or a ReLU applied last, all where it stores."""
    bias: bool = False
    relu: bool = False
    residual: bool = False
    pre_relu: bool = False      # a ReLU after the bias and before the residual (the TCN's block)
    # "softmax" or "logsoftmax": the SoftMax/LogSoftmax of the last axis that followed, applied
    # to each row after everything else (only a layer that declares `accepts_row_softmax`)
    row_softmax: str = ""
    label: str = ""          # what was fused, for profiles: "scale+bias+relu"
    gelu: str = ""           # "erf" | "tanh": the Gelu that followed, applied last (not with relu)


@dataclass(frozen=True)
class CompileContext:
    """The facts an implementation receives beside its tensors and attributes (OpenVINO's
    kernel selector passes EngineInfo and fused_ops the same way, as typed fields)."""
    device: DeviceTraits | None = None     # None: not known (a standalone run of an op)
    epilogue: FusedEpilogue | None = None
    # (lower, upper) B,F,Y,X padding the network hands custom layers' inputs with (the contract
    # says kernels must work on padded views; Network(pad_custom_inputs=...) proves it)
    custom_input_padding: tuple | None = None
    # the kernel variant to run, one of the objects LayerImpl.variants() gave for this call
    # (jit/variant.py: the tuner, runtime/tuning/tuning.py, chose it by timing); None: the
    # implementation's heuristic pick
    variant: KernelVariant | None = None
    # what graph rewrites (passes/) learned about the node and hand to its implementation, as
    # typed values of the implementation's own classes (ops/nn/conv.py's InputShuffle, ...), taken
    # from the graph node's `facts`
    facts: tuple = ()

    def fact(self, kind: type[T]) -> T | None:
        """The fact of class `kind`, else None."""
        return next((f for f in self.facts if isinstance(f, kind)), None)

    @property
    def on_cpu(self) -> bool:
        """The device is a CPU (PoCL and the like): the ops take their CPU-shaped kernels."""
        return self.device is not None and self.device.kind == "CPU"


DEFAULT_CONTEXT = CompileContext()
