"""BoundKernel: one custom layer bound to concrete tensors.

It holds what running the layer needs and nothing that must be recomputed per run: the compiled
program and its kernel, the argument plan (which kernel argument is which input, output or Data
blob, from `arg-index`), the evaluated work sizes. Registry.bind() makes them.

Three ways to run one:
  launch()   the work as a KernelLaunch, so the graph executor treats it like a built-in op;
  enqueue()  on caller-owned buffers, the fast path: arguments are set on the kernel only when a
             buffer differs from the previous call, nothing is allocated or evaluated per call;
  __call__   numpy in, numpy out, for tests and scripts (packs padding and format, uploads,
             runs, reads back, unpacks).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyopencl as cl

from ...config.simplegpu.spec import LayerSpec
from ...errors import BindingError, KernelWriteError
from ...jit.bindings import data_blob
from ...jit.tensor import TensorDesc
from ...jit.launch import Arg, KernelLaunch
from ..device.kernel_objects import set_kernel_args
from ..device.launch_args import ArgumentSource, bind_args
from .unwritten import (FIRST, SECOND, changed_guard, first_index, guard_bytes, guard_pattern,
                        kept, past_end_message)

# argument plan entries: (kind, index) with kind "input" | "output" | "data"
INPUT, OUTPUT, DATA = "input", "output", "data"

# looked up once: enqueue() is the per-launch hot path
_enqueue_nd_range = cl.enqueue_nd_range_kernel


def argument_plan(spec: LayerSpec) -> tuple[tuple[str, int], ...]:
    """Kernel argument i -> (kind, index). Data blobs are numbered in arg order, the order in
    which they are appended to the JIT's inputs."""
    slots: dict[int, tuple[str, int]] = {}
    for t in spec.tensors:
        slots[t.arg_index] = (INPUT if t.kind == "input" else OUTPUT, t.port_index)
    for k, d in enumerate(spec.data_in_arg_order):
        slots[d.arg_index] = (DATA, k)
    return tuple(slots[i] for i in sorted(slots))


class BoundKernel:
    """A custom layer ready to run: see the module docstring."""

    def __init__(self, spec: LayerSpec, inputs: Sequence[TensorDesc],
                 outputs: Sequence[TensorDesc], data_descs: Sequence[TensorDesc],
                 data_values: Sequence[np.ndarray | None], source, program: cl.Program,
                 kernel: cl.Kernel, engine, options: str | None = None):
        self.spec = spec
        self.inputs = tuple(inputs)            # as the kernel receives them (format applied)
        self.outputs = tuple(outputs)
        self.data_descs = tuple(data_descs)    # 1-D, in arg order
        self.data_names = tuple(d.name for d in spec.data_in_arg_order)
        self.data_values = tuple(data_values)  # flat arrays of the data descs' dtype, or None
        self.source = source                   # GeneratedProgram
        self.options = source.options if options is None else options   # as built
        self.global_size = tuple(source.global_size)
        self.local_size = tuple(source.local_size) if source.local_size else None
        self.program = program
        self.kernel = kernel
        self.engine = engine
        self.plan = argument_plan(spec)
        # enqueue() takes (*inputs, *outputs, *data) as one tuple; position of each argument in it
        n_in, n_out = len(self.inputs), len(self.outputs)
        base = {INPUT: 0, OUTPUT: n_in, DATA: n_in + n_out}
        self._positions = tuple(base[kind] + k for kind, k in self.plan)
        self._last_args: list = [None] * len(self.plan)
        self._last_given: tuple = ()
        self._default_data: tuple[cl.Buffer, ...] = ()   # bound Data blobs, once uploaded
        self.build_warnings = ""    # the compiler's warnings, at the user's lines ('' when none)

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        ins = ", ".join(d.describe() for d in self.inputs)
        return (f"<BoundKernel {self.spec.name} entry={self.spec.entry} inputs=[{ins}] "
                f"global={list(self.global_size)} local={list(self.local_size or [])}>")

    # -- the executor's view ---------------------------------------------------------------
    def launch(self) -> KernelLaunch:
        """The same work as a KernelLaunch: inputs are Arg.input(port), outputs
        Arg.output(port), Data blobs Arg.const(values)."""
        return self._launch_with([self._data_value(k) for k in range(len(self.data_descs))])

    def _launch_with(self, blobs: Sequence[np.ndarray]) -> KernelLaunch:
        """launch(), with these flat Data blobs (in arg order) as its constant arguments: a
        blob bound by its description only needs no value here."""
        return kernel_launch(self.spec, self.source, self.options, blobs)

    def _data_value(self, k: int) -> np.ndarray:
        return data_value(self.spec, self.data_values, k)

    # -- the fast path ---------------------------------------------------------------------
    def enqueue(self, queue: cl.CommandQueue, inputs: Sequence[cl.Buffer],
                outputs: Sequence[cl.Buffer], data: Sequence[cl.Buffer] = (),
                wait_for=None) -> cl.Event:
        """Enqueue the kernel on caller-owned buffers; returns its event. Without `data`, the
        bound Data arrays are used (uploaded once, on first use)."""
        given = (*inputs, *outputs, *data)
        # the common case is the buffers of last time: one tuple comparison (identity first,
        # element by element), no set_arg, nothing allocated but the tuple
        if given != self._last_given:
            self._set_arguments(inputs, outputs, data, given)
        return _enqueue_nd_range(queue, self.kernel, self.global_size, self.local_size, None,
                                 wait_for)

    def _set_arguments(self, inputs, outputs, data, given) -> None:
        if not data and self.data_descs:
            data = self._default_data or self._upload_data()
        if (len(inputs) != len(self.inputs) or len(outputs) != len(self.outputs)
                or len(data) != len(self.data_descs)):
            raise BindingError(f"layer type '{self.spec.name}': enqueue got {len(inputs)} input, "
                               f"{len(outputs)} output and {len(data)} data buffers; the "
                               f"binding has {len(self.inputs)}, {len(self.outputs)} and "
                               f"{len(self.data_descs)}")
        buffers = (*inputs, *outputs, *data)
        last = self._last_args
        for i, pos in enumerate(self._positions):
            buf = buffers[pos]
            if buf is not last[i]:
                self.kernel.set_arg(i, buf)
                last[i] = buf
        self._last_given = given

    def _upload_data(self) -> tuple[cl.Buffer, ...]:
        mf = cl.mem_flags
        self._default_data = tuple(
            cl.Buffer(self.engine.context, mf.READ_ONLY | mf.COPY_HOST_PTR,
                      hostbuf=self._data_value(k)) for k in range(len(self.data_descs)))
        return self._default_data

    # -- numpy convenience -----------------------------------------------------------------
    def __call__(self, *arrays: np.ndarray, **data: np.ndarray):
        """Run on numpy arrays (logical shapes); returns the output array, or a list of them
        when the layer has several outputs. Keyword arguments replace bound Data blobs. An
        output element the kernel never wrote is a KernelWriteError, never whatever the memory
        held (unwritten.py: a second run with another sentinel only when one is suspect)."""
        launch = self._launch_with(self._call_blobs(arrays, data))
        results = self._run_filled(launch, arrays, FIRST)
        suspect = [kept(r, FIRST) for r in results]
        if any(m is not None and m.any() for m in suspect):
            again = self._run_filled(launch, arrays, SECOND)
            for port, (mask, out) in enumerate(zip(suspect, again)):
                never = None if mask is None else mask & kept(out, SECOND)
                if never is not None and never.any():
                    raise KernelWriteError.never_written(self._unwritten_message(port, never))
        return results[0] if len(results) == 1 else results

    def _run_filled(self, launch: KernelLaunch, arrays, run: int) -> list[np.ndarray]:
        """One numpy call's upload, launch and read-back, its outputs and the guard zones after
        them filled with the sentinel of `run` first; a KernelWriteError when the kernel wrote
        into a guard zone (past an output's end)."""
        ctx, queue = self.engine.context, self.engine.queue
        mf = cl.mem_flags
        in_bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=d.pack(a))
                   for d, a in zip(self.inputs, arrays)]
        # (never past the largest buffer the device allocates: an output that fits is run)
        largest = self.engine.device.max_mem_alloc_size
        guards = [guard_bytes(d.nbytes, largest - d.nbytes) for d in self.outputs]
        out_bufs = [cl.Buffer(ctx, mf.READ_WRITE, d.nbytes + g)
                    for d, g in zip(self.outputs, guards)]
        # the kernel waits for the fills by their events: the engine's queue may be the
        # user's, out of order
        patterns = [guard_pattern(d.np_dtype, run) for d in self.outputs]
        fills = [cl.enqueue_fill_buffer(queue, buf, pattern, 0, d.nbytes + g)
                 for d, g, buf, pattern in zip(self.outputs, guards, out_bufs, patterns)]
        # a one-off launch through the same kernel object would disturb enqueue()'s record of
        # what is set; a fresh kernel keeps the two paths apart
        kernel = cl.Kernel(self.program, self.spec.entry)
        source = _CallArgs(ctx, in_bufs, out_bufs)
        set_kernel_args(kernel, bind_args(launch.args, source, self.spec.name))
        event = cl.enqueue_nd_range_kernel(queue, kernel, self.global_size, self.local_size,
                                           wait_for=fills)
        # waited for in a call that lets go of the GIL (PoCL's read would block holding it), so
        # that Ctrl-C can end a kernel that never finishes (cli/interrupt.py)
        event.wait()
        hosts = []
        for desc, g, buf in zip(self.outputs, guards, out_bufs):
            host = np.empty(desc.nbytes + g, np.uint8)
            cl.enqueue_copy(queue, host, buf, wait_for=[event], is_blocking=False)
            hosts.append(host)
        queue.finish()
        for port, (desc, host, pattern) in enumerate(zip(self.outputs, hosts, patterns)):
            changed = changed_guard(host[desc.nbytes:], pattern)
            if changed is not None:
                raise KernelWriteError(past_end_message(
                    f"layer type '{self.spec.name}' ({self.spec.location}): output {port}",
                    desc, changed, len(host) - desc.nbytes,
                    f"guard the writes in the kernel, or fix its <WorkSizes> "
                    f"({self.spec.work_sizes.location}; now {list(self.global_size)})"))
        return [desc.unpack(host[:desc.nbytes].view(desc.np_dtype))
                for desc, host in zip(self.outputs, hosts)]

    def _unwritten_message(self, port: int, never: np.ndarray) -> str:
        desc = self.outputs[port]
        formula = next((t for t in self.spec.outputs if t.port_index == port and t.shape), None)
        origin = (f"the shape formula '{formula.shape}' ({formula.location}) gives its shape"
                  if formula else "the layer has no shape formula for it, so its shape is the "
                                  "one given to bind (run-layer's --output-shape), else input 0's")
        return (f"layer type '{self.spec.name}' ({self.spec.location}): output {port} "
                f"({desc.describe()}): {int(never.sum())} of {never.size} elements were never "
                f"written by the kernel, the first at index {first_index(never)}. Either the "
                f"kernel writes another shape ({origin}): give the shape it writes; or its work "
                f"sizes ({list(self.global_size)}) or its guards skip elements: fix its "
                f"<WorkSizes> ({self.spec.work_sizes.location}) or the kernel (--check-bounds "
                f"also finds writes out of bounds)")

    def prepared_call(self, *arrays: np.ndarray, **data: np.ndarray):
        """What one numpy call would run, without running it: (the launch with this call's Data
        blobs, the inputs packed as the kernel reads them). The checkers (runtime/checks: guard
        zones, Oclgrind) run it their own way."""
        launch = self._launch_with(self._call_blobs(arrays, data))
        return launch, [d.pack(a) for d, a in zip(self.inputs, arrays)]

    def _call_blobs(self, arrays, data) -> list[np.ndarray]:
        """The flat Data blobs of a numpy call (given ones replace bound ones), after checking
        the call's arrays and names."""
        if len(arrays) != len(self.inputs):
            raise BindingError(f"layer type '{self.spec.name}' takes {len(self.inputs)} input "
                               f"array(s), got {len(arrays)}")
        for i, (array, desc) in enumerate(zip(arrays, self.inputs)):
            if tuple(np.shape(array)) != desc.shape:
                raise BindingError(f"layer type '{self.spec.name}': input {i} has shape "
                                   f"{list(np.shape(array))}, but the kernel was bound for "
                                   f"{list(desc.shape)}; bind it again for this shape")
        unknown = set(data) - set(self.data_names)
        if unknown:
            raise BindingError(f"layer type '{self.spec.name}' has no Data named "
                               f"{', '.join(sorted(unknown))}; its Data: "
                               f"{', '.join(self.data_names) or 'none'}")
        return [flat_blob(name, data[name], desc, self.spec.name) if name in data
                else self._data_value(k)
                for k, (name, desc) in enumerate(zip(self.data_names, self.data_descs))]


class _CallArgs(ArgumentSource):
    """A numpy call's buffers: the uploaded inputs, the outputs, and an upload of each Data blob
    (kept in `data` while the kernel runs: pyopencl's set_args does not keep them alive)."""

    def __init__(self, context, inputs: Sequence[cl.Buffer], outputs: Sequence[cl.Buffer]):
        self.context, self.inputs, self.outputs = context, inputs, outputs
        self.data: list[cl.Buffer] = []

    def input(self, arg, position):
        return self.inputs[arg.index]

    def output(self, arg, position):
        return self.outputs[arg.index]

    def const(self, arg, position):
        self.data.append(cl.Buffer(self.context, cl.mem_flags.READ_ONLY |
                                   cl.mem_flags.COPY_HOST_PTR, hostbuf=arg.value))
        return self.data[-1]


def kernel_buffers(inputs: Sequence[TensorDesc], outputs: Sequence[TensorDesc], data,
                   data_descs: Sequence[TensorDesc]) -> list[tuple[int, str]]:
    """(bytes, name) of every buffer a run of the kernel alone allocates (device_memory.py)."""
    return ([(d.nbytes, f"input {i} ({d.describe()})") for i, d in enumerate(inputs)]
            + [(d.nbytes, f"output {i} ({d.describe()})") for i, d in enumerate(outputs)]
            + [(d.nbytes, f"Data '{b.name}'") for b, d in zip(data, data_descs)])


def flat_blob(name: str, value, desc: TensorDesc, layer: str) -> np.ndarray:
    """A Data array as the flat buffer contents of `desc` (size checked, dtype converted)."""
    arr = np.asarray(value).reshape(-1)
    if arr.size != desc.count:
        raise BindingError(f"layer type '{layer}': Data '{name}' has {arr.size} elements, the "
                           f"binding expects {desc.count}")
    return np.ascontiguousarray(arr.astype(desc.np_dtype, copy=False))


def data_descs_and_values(spec: LayerSpec, data: Mapping[str, object]
                          ) -> tuple[list[TensorDesc], list[np.ndarray | None]]:
    """The 1-D descriptions (and flat values) of the layer's Data blobs, in arg order.
    A blob may be given as an array or, to compile without values, as a TensorDesc."""
    names = [d.name for d in spec.data_in_arg_order]
    missing = [n for n in names if n not in data]
    if missing:
        raise BindingError(f"layer type '{spec.name}' binds Data {', '.join(missing)} "
                           f"({spec.location}); give {'them' if len(missing) > 1 else 'it'} "
                           f"as data={{name: array}}")
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise BindingError(f"layer type '{spec.name}' has no Data named {', '.join(unknown)}; "
                           f"its Data: {', '.join(names) or 'none'}")
    descs: list[TensorDesc] = []
    values: list[np.ndarray | None] = []
    for name in names:
        given = data[name]
        if isinstance(given, TensorDesc):
            descs.append(data_blob(given))
            values.append(None)
            continue
        arr = np.asarray(given)
        if arr.dtype == np.float64:   # numpy's default; kernels take float
            arr = arr.astype(np.float32)
        if arr.size == 0:
            raise BindingError(f"layer type '{spec.name}': Data '{name}' is empty")
        desc = data_blob(TensorDesc((arr.size,), arr.dtype))
        descs.append(desc)
        values.append(flat_blob(name, arr, desc, spec.name))
    return descs, values


def kernel_launch(spec: LayerSpec, source, options: str,
                  blobs: Sequence[np.ndarray]) -> KernelLaunch:
    """A custom layer's kernel as a KernelLaunch: inputs are Arg.input(port), outputs
    Arg.output(port), Data blobs Arg.const(values) (flat, in arg order); `source` its
    GeneratedProgram, `options` the build options."""
    args = []
    for kind, k in argument_plan(spec):
        if kind == INPUT:
            args.append(Arg.input(k))
        elif kind == OUTPUT:
            args.append(Arg.output(k))
        else:
            args.append(Arg.const(blobs[k]))
    return KernelLaunch(source=source.text, entry=spec.entry, args=tuple(args),
                        global_size=tuple(source.global_size),
                        local_size=tuple(source.local_size) if source.local_size else None,
                        options=options, label=spec.name, line_map=source.line_map)


def data_value(spec: LayerSpec, values: Sequence[np.ndarray | None], k: int) -> np.ndarray:
    """Data blob k's flat value (in arg order); a blob bound by its description only has none
    to run with."""
    value = values[k]
    if value is None:
        raise BindingError(f"layer type '{spec.name}': Data "
                           f"'{spec.data_in_arg_order[k].name}' was bound by its description "
                           "only; bind it with an array to run it")
    return value

