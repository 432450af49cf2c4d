"""InferRequest: the buffers and bound kernels of one in-flight inference.

Everything that can be decided before running is decided here, once: buffers are allocated
from the memory plan, kernels get their arguments set, and the launch list becomes a flat list of
(kernel, global, local). Running is then a loop of enqueues with no host wait between layers; the
host waits once, for the outputs, or not at all when the caller chains the returned event.

The user's tensors (set_tensor, host_tensor; runtime/execute/user_tensors.py, host_memory.py) change
only which buffer a tensor lies in: a device input is read where it lies, a device output is
written in place (its producer's kernels are bound to the user's buffer, so the memory plan puts
it there). On an out-of-order queue each command waits on the events of the commands it depends
on (runtime/execute/run.py); the first commands wait on the caller's `wait_for`.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from ...errors import CustomLayersError, DeviceError, ExecutionError, ModelError, TensorError
from ..device.device_memory import reserve_for_request
from .events import await_dependencies, dependency_error, failed_dependency, status
from ..device.host_memory import PinnedTensor, constant_buffer, pinned_tensor
from .run import Copy, Run, command_dependencies, prepare_run, sinks
from ..device.sub_buffers import SubBuffers
from .user_tensors import DeviceTensor, device_tensor, host_array, is_device_value
from .host_step import HostStep, HostSteps
from ..device.kernel_objects import next_serial, release_newest_first, set_kernel_args
from ..device.launch_args import bind_args
from ..device.limits import steady_local_size
from .request_args import RequestArgs
from .states import RequestStates, VariableState
from .unwritten import FirstRunCheck


class InferRequest:
    def __init__(self, network, plan):
        self.network = network
        self.plan = plan
        eng = self.engine = network.engine
        self.context = eng.context
        self.device = eng.device
        self._own_queue = eng.shared_queue is None
        self.queue = self._make_queue() if self._own_queue else eng.shared_queue
        # why the request does not run again, once a failed wait_for event stopped its host
        # steps half-way (wait); None while it may run
        self._spent: str | None = None
        # constants are written through the engine's own queue (host_memory.constant_buffer);
        # never through a user's queue, whose earlier work a blocking write would wait for
        self.upload_queue = eng.queue if self._own_queue else None
        if network.profiling and not self.queue.properties & \
                cl.command_queue_properties.PROFILING_ENABLE:
            raise DeviceError("profiling needs a queue made with PROFILING_ENABLE; the queue "
                              "given to Engine.from_queue has none")
        reserve_for_request(eng.device, plan, self)    # before any buffer (device_memory.py)
        mf = cl.mem_flags
        self._slots = [cl.Buffer(eng.context, mf.READ_WRITE, size) for size in plan.memory.slot_sizes]
        self._inputs = {}
        for name, key in plan.inputs:
            desc = plan.descs[key]
            self._inputs[name] = (cl.Buffer(eng.context, mf.READ_ONLY, max(desc.nbytes, 1)), desc)
        self._launches: list[tuple] = []    # (kernel, global, local, step index)
        self._access: list[tuple] = []      # per launch: (root keys read, root keys written)
        self._uses: dict = {}               # root key -> [(kernel, argument index)]
        # Buffers only a kernel refers to must stay referenced here: pyopencl's set_args does not
        # keep them alive, and a freed buffer is INVALID_MEM_OBJECT on NVIDIA (PoCL stays silent).
        self._scratch: list[cl.Buffer] = []
        # slices of Concat outputs written in place, released before the slots they are cut from
        self._slices = SubBuffers()
        # the model's variables: one buffer each, the request's own for its life (states.py)
        self._states = RequestStates(self, plan)
        self._bind_all()
        # Python layers: host steps between the kernels, run by a worker (host_step.py)
        self._host = HostSteps(eng.context, eng.device, maps=eng.unified_memory) \
            if any(s.host is not None for s in plan.steps) else None
        if self._host is not None and eng.out_of_order:
            raise ExecutionError("a network with Python layers (host steps) runs on an in-order "
                                 "queue; the queue given to Engine.from_queue is out-of-order")
        # the custom layers' outputs, checked for elements never written and writes past their
        # end in the first run (unwritten.py); on an in-order queue, which orders the fills and
        # copies it adds
        check = FirstRunCheck(plan, self._launches, eng.context) \
            if not eng.out_of_order else None
        self._check = check if check is not None and check.pending else None
        self._defaults = {root: self._default_buffer(root) for root in self._uses}
        self._bound = dict(self._defaults)
        # roots the last run bound to a buffer other than their own (the user's): the next
        # run puts back only these, and binds only what its binding names (a TCN's 36 tensors
        # walked every run cost 15-30 us of a 200 us inference)
        self._away: set = set()
        self._user: dict = {}               # tensor name -> numpy | DeviceTensor | PinnedTensor
        # the last run's bindings and copies where they depend on nothing but _user's device
        # buffers (_prepare); None whenever _user changes
        self._prepared: Run | None = None
        self._deps_cache: dict = {}
        self._setup = None                  # a private queue for maps (never the user's)
        self.busy = False
        self._run: Run | None = None
        self.events: list = []              # per launch, when profiling
        self.copies = 0                     # enqueue_copy calls made, over the request's life
        self.serial = next_serial()         # creation order, for releasing newest first

    def release_kernels(self) -> None:
        """Drop the request's kernels, the newest first (kernel_objects.py); it runs no more."""
        launches = getattr(self, "_launches", None)    # None: __init__ raised before it
        if launches:
            self._uses = {}                 # the other references to the kernels
            self._states.forget_kernels()
            self._launches = []
            release_newest_first(launches)

    def __del__(self):
        # the sub-buffers first, while the context, the queue and the slots they are cut from
        # still live: in a reference cycle (network <-> request) the garbage collector would
        # drop those in any order, and NVIDIA's driver segfaults releasing a sub-buffer late;
        # then the kernels, newest first (kernel_objects.py). getattr, never self.__dict__:
        # on CPython 3.11+ reading __dict__ in a finalizer makes a dict the collector has not
        # seen, everything the request holds counts as resurrected, and the network, its plan
        # and its buffers (gigabytes for VGG) outlive the collection that finalized them
        slices = getattr(self, "_slices", None)
        if slices is not None:
            slices.release()
        self.release_kernels()

    def _make_queue(self):
        props = cl.command_queue_properties.PROFILING_ENABLE if self.network.profiling else 0
        return cl.CommandQueue(self.context, self.device, properties=props)

    # -- setup -----------------------------------------------------------------------------
    def _default_buffer(self, root):
        plan = self.plan
        if root in plan.consts:
            return _const_buffer(self.context, plan, root, self.engine.unified_memory,
                                 self.upload_queue)
        if root in self._states:
            return self._states.buffers[root]
        for name, k in plan.inputs:
            if k == root:
                return self._inputs[name][0]
        try:
            return self._slots[plan.memory.slot_of[root]]
        except KeyError:
            raise ModelError(f"tensor {root} has no buffer (nothing computes it)") from None

    def _own_buffer(self, key):
        """The request's buffer of tensor `key`: its root's, or a sub-buffer of it where the
        tensor is a slice of a Concat's output (the plan placed it at an aligned origin)."""
        root = self.plan.root(key)
        offset = self.plan.slice_at(key)
        if offset is None:
            return self._default_buffer(root)
        nbytes = self.plan.descs[key].nbytes
        return self._slices.cut(self._default_buffer(root), offset, nbytes)

    def buffer(self, key):
        """The buffer tensor `key` lies in now (the user's, once set_tensor put it there)."""
        root = self.plan.root(key)
        if self.plan.slice_at(key) is not None:   # never in the user's buffer
            return self._own_buffer(key)
        bound = self._bound.get(root)
        return bound if bound is not None else self._default_buffer(root)

    def _bind_all(self) -> None:
        plan = self.plan
        for index, (step, programs) in enumerate(zip(plan.steps, plan.programs)):
            scratch: dict[int, cl.Buffer] = {}
            for launch, program in zip(step.launches, programs):
                kernel = cl.Kernel(program, launch.entry)
                source = RequestArgs(self, step, index, kernel, scratch)
                args = bind_args(launch.args, source, step.name)
                try:
                    set_kernel_args(kernel, args)
                except cl.Error as e:
                    raise ExecutionError(
                        f"layer '{step.name}' (type {step.type}, {step.impl}): cannot set the "
                        f"arguments of kernel '{launch.entry}': {e}") from e
                # a launch that gives no local size: one of a few on PoCL (limits.py)
                local = launch.local_size or steady_local_size(self.engine.device,
                                                                launch.global_size)
                self._launches.append((kernel, launch.global_size, local, index))
                self._access.append((frozenset(source.reads), frozenset(source.writes)))
            if step.host is not None:        # its buffers are looked up when it is enqueued
                self._launches.append((HostStep(step), None, None, index))
                self._access.append((frozenset(map(plan.root, step.inputs)),
                                     frozenset(map(plan.root, step.outputs))))

    # -- the user's tensors ----------------------------------------------------------------
    def _tensor(self, name: str):
        """('input' | 'output', its TensorDesc); TensorError for a name the network lacks."""
        for role, pairs in (("input", self.plan.inputs), ("output", self.plan.outputs)):
            for n, key in pairs:
                if n == name:
                    return role, self.plan.descs[key]
        if name in self.network.value_inputs:
            raise TensorError(f"input '{name}' is {self.network.value_inputs[name]}, compiled in "
                              f"by value: it takes no tensor (create_request with its value)")
        raise TensorError(f"no tensor '{name}' in the network; inputs: "
                          f"{', '.join(n for n, _ in self.plan.inputs) or 'none'}; outputs: "
                          f"{', '.join(n for n, _ in self.plan.outputs) or 'none'}")

    def _refuse_while_running(self, what: str) -> None:
        if self.busy:
            raise ExecutionError(f"{what}: the request is still running (started, not yet "
                                 f"waited for); call wait() first")

    def set_tensor(self, name: str, value) -> None:
        """Give input or output `name` a numpy array, a pyopencl.Buffer (dense, in the tensor's
        dtype and shape) or a pyopencl.array.Array. It stays set for later runs. A device input
        is read where it lies when the network runs; a device output is written in place."""
        self._refuse_while_running(f"tensor '{name}'")
        role, desc = self._tensor(name)
        if is_device_value(value):
            tensor = device_tensor(name, role, value, desc, self.engine)
            self._check_overlap(role, tensor)
        elif isinstance(value, np.ndarray):
            tensor = host_array(name, role, value, desc)
        else:
            raise TensorError(f"{role} '{name}': expected a numpy array, a pyopencl.Buffer or "
                              f"a pyopencl.array.Array, found {type(value).__name__}")
        self._user[name] = tensor
        self._prepared = None

    def _check_overlap(self, role: str, tensor: DeviceTensor) -> None:
        """A buffer the network writes may not be one it reads or writes for another tensor."""
        for other, value in self._user.items():
            if other == tensor.name or not isinstance(value, DeviceTensor):
                continue
            other_role = self._tensor(other)[0]
            if "output" in (role, other_role) and tensor.overlaps(value):
                raise TensorError(f"{role} '{tensor.name}': its buffer overlaps the one of "
                                  f"{other_role} '{other}'; expected separate memory for a "
                                  f"tensor the network writes")

    def host_tensor(self, name: str) -> np.ndarray:
        """A numpy array over pinned, mapped host memory for input or output `name`: fill it in
        place (an input) or read it after wait() (an output); the request uploads from it or
        reads back into it with no further copy (on a CPU device it is the device's memory)."""
        self._refuse_while_running(f"host tensor '{name}'")
        role, desc = self._tensor(name)
        current = self._user.get(name)
        if isinstance(current, PinnedTensor):
            return current.array
        if self._setup is None:
            self._setup = cl.CommandQueue(self.context, self.device)
        pinned = self._user[name] = pinned_tensor(self.context, self._setup, desc, role)
        self._prepared = None
        return pinned.array

    # -- running ---------------------------------------------------------------------------
    def start(self, arrays: dict) -> None:
        """Enqueue the inference with these input arrays (by name; names that are not inputs
        of this plan, such as value inputs, are ignored); return without waiting. An array
        may be read where it lies until wait(): do not change it before then."""
        self._start(arrays, None)

    def start_async(self, wait_for=None):
        """Enqueue the whole inference with the tensors set; return a pyopencl.Event that
        completes when every output is written. The first commands wait on `wait_for` (the
        user's events) on the device; the host never waits here."""
        return self._start({}, wait_for)

    def _start(self, arrays: dict, wait_for):
        self._refuse_while_running("start")
        if self._spent is not None:
            raise ExecutionError(self._spent)
        wait_for = self._check_events(wait_for)
        run = self._prepare(arrays)           # every check first: a refusal enqueues nothing
        run.wait_for = wait_for
        run.check = self._check if self._check is not None and self._check.pending else None
        try:
            self._rebind(run.binding)
            self._states.before_run()
            run.done = self._enqueue(run)
        except cl.Error as e:
            raise ExecutionError(f"enqueue failed: {e}") from e
        self._states.after_start()
        self._run = run
        self.busy = True
        return run.done

    def _check_events(self, wait_for) -> list:
        if wait_for is None:
            return []
        # one event is a list of one (clEnqueue* take a list; a user passes one as often)
        events = [wait_for] if isinstance(wait_for, cl.Event) else list(wait_for)
        for i, e in enumerate(events):
            if not isinstance(e, cl.Event):
                raise TensorError(f"wait_for event {i}: expected a pyopencl.Event, found "
                                  f"{type(e).__name__}")
            if e.context != self.context:
                raise TensorError(f"wait_for event {i} belongs to another OpenCL context; "
                                  f"expected one of the network's")
        failed = failed_dependency(events)
        if failed is not None:
            raise dependency_error(*failed)
        return events

    def _prepare(self, arrays: dict) -> Run:
        """This run's bindings and copies, every value checked; nothing enqueued.

        Where every tensor the run touches is a device buffer the user set (no array to upload
        or read into), the last such run's bindings and copies serve again until set_tensor or
        host_tensor changes what is set: checking them again cost 16-29 us before the first
        launch of an inference of 150-230 us (the TCN at batch 1, on the H100's host)."""
        if not arrays and self._prepared is not None:
            return self._prepared.again()
        run = prepare_run(self.plan, self._inputs, self._user, arrays, self.context,
                          self.engine.unified_memory, self._own_buffer)
        if not arrays and run.reusable() and \
                all(isinstance(v, DeviceTensor) for v in self._user.values()):
            self._prepared = run
        return run

    def _rebind(self, binding: dict) -> None:
        """Point the kernels at this run's buffers where they differ from the last run's."""
        uses = self._uses
        for root in self._away.union(r for r in binding if r in uses):
            buf = binding.get(root)
            if buf is None:
                buf = self._defaults[root]
            if self._bound[root] is buf:
                continue
            for kernel, n in uses[root]:
                kernel.set_arg(n, buf)
            self._bound[root] = buf
        self._away = {root for root in self._away.union(binding)
                      if root in uses and self._bound[root] is not self._defaults[root]}

    def _enqueue(self, run: Run):
        """Enqueue the run's copies and kernels; returns the event of its completion."""
        q = self.queue
        user = run.wait_for
        by_events = self.engine.out_of_order
        deps = self._dependencies(run) if by_events else None
        events: list = run.events
        user_waited = False                 # in-order: whether a command took `user` yet

        def after(n: int, device_side: bool):
            """The wait list of command n."""
            nonlocal user_waited
            if by_events:
                mine = [events[d] for d in deps[n]]
                return mine + user if not mine and device_side else mine or None
            if device_side and not user_waited:
                user_waited = True
                return user or None         # the in-order queue orders everything after it
            return None

        for c in run.pre:
            events.append(self._copy(q, c, after(len(events), c.kind != "upload")))
        steps = self.plan.steps
        launched = []
        if self._host is not None:
            self._host.begin()
        check = run.check
        buffer_of = (lambda key: self._checked_buffer(run, key)) if check is not None else None
        for n, (k, g, l, i) in enumerate(self._launches):   # no host wait between layers
            if check is not None and n in check.fills:
                # the wait list is taken only by a fill enqueued (an output whose span is
                # empty, in a user's buffer, enqueues none: the kernel then takes the user's)
                events += check.fill(q, n, buffer_of, lambda: after(len(events), True))
            if isinstance(k, HostStep):      # a Python layer: maps, a worker, a user event
                wait = after(len(events), True)
                if wait:
                    self._host.keep(cl.enqueue_barrier(q, wait_for=wait))
                k.bind([self._run_buffer(run, key) for key in k.step.inputs],
                       [self._run_buffer(run, key) for key in k.step.outputs])
                timing = self._host.enqueue_step(q, k)
                events.append(cl.enqueue_marker(q))
                launched.append((steps[i], timing))
                continue
            event = cl.enqueue_nd_range_kernel(q, k, g, l, wait_for=after(len(events), True))
            events.append(event)
            launched.append((steps[i], event))
            if check is not None and n in check.reads:
                events += check.read(q, n, buffer_of, run.checked)
        # PoCL: read by maps (host_step.py); a GPU's own memory: by plain reads
        by_map = self._host is not None and self._host.maps
        for c in run.post:
            if by_map and c.kind == "read":
                # PoCL blocks in clEnqueueReadBuffer, holding the GIL, while a user event the
                # queue waits for is pending: a run with host steps reads its outputs by maps
                mapped, event = self._host.map_output(q, c.src, c.dst)
                run.maps.append((mapped, c.dst))
                events.append(event)
                continue
            events.append(self._copy(q, c, after(len(events), True)))
        if check is not None and run.checked:
            event, run.check_host, mapped = check.collect(q, by_map=by_map)
            events.append(event)
            if mapped is not None:
                run.maps.append((mapped, run.check_host))
        if self._host is not None:
            q.flush()          # the worker waits for the maps: get them going now
        self.events = launched if self.network.profiling else []
        if by_events:
            return cl.enqueue_marker(q, wait_for=[events[s] for s in sinks(deps)] or user or None)
        if not events or (user and not user_waited):
            return cl.enqueue_marker(q, wait_for=user or None)
        return events[-1]

    def _run_buffer(self, run: Run, key):
        """The buffer tensor `key` lies in for this run (a user's tensor, an input used where
        it lies, else the request's own)."""
        return self._checked_buffer(run, key)[0]

    def _checked_buffer(self, run: Run, key):
        """(_run_buffer's buffer of `key`, whether it is the request's own: only a slot of the
        memory plan has the guard zone after a tensor; a user's buffer is filled and read only
        where the tensor lies)."""
        root = self.plan.root(key)
        bound = None if self.plan.slice_at(key) is not None else run.binding.get(root)
        return (bound, False) if bound is not None else (self._own_buffer(key), True)

    def _copy(self, q, c: Copy, wait_for):
        self.copies += 1
        if c.kind == "device":
            return cl.enqueue_copy(q, c.dst, c.src, byte_count=c.nbytes,
                                   dst_offset=c.dst_offset, src_offset=c.src_offset,
                                   wait_for=wait_for)
        return cl.enqueue_copy(q, c.dst, c.src, is_blocking=False, wait_for=wait_for)

    def _dependencies(self, run: Run) -> list:
        """Per command of the run (pre copies, launches, post copies), the earlier ones it
        waits for: by the memory each touches (a tensor in the user's buffer is memory of its
        own; the others are their slot of the memory plan)."""
        key = (tuple(sorted(map(repr, run.binding))),
               tuple((c.kind, c.reads, c.writes) for c in run.pre + run.post))
        deps = self._deps_cache.get(key)
        if deps is None:
            slot_of = self.plan.memory.slot_of

            def memory(keys):
                return frozenset(("user", k) if k in run.binding else
                                 ("slot", slot_of[k]) if k in slot_of else k for k in keys)
            accesses = [(memory(c.reads), memory(c.writes)) for c in run.pre]
            accesses += [(memory(r), memory(w)) for r, w in self._access]
            accesses += [(memory(c.reads), memory(c.writes)) for c in run.post]
            deps = self._deps_cache[key] = command_dependencies(accesses)
        return deps

    def wait(self, timeout: float | None = None) -> dict[str, np.ndarray]:
        """Wait for the inference (the one host wait) and return the outputs that are host
        arrays (device outputs are already in place). A failed wait_for event is an
        ExecutionError, not a hang; `timeout` bounds a wait on the user's events (the request
        stays running after a timeout: wait again)."""
        if not self.busy:
            raise ExecutionError("this request was not started")
        run = self._run
        try:
            ready = not run.wait_for or await_dependencies(run.wait_for, run.done, timeout)
        except ExecutionError as e:         # a wait_for event failed: nothing of ours runs
            if self._host is not None:
                # its host steps' maps and barriers failed half-way: a later run of this
                # request read garbage or aborted PoCL 3.1 (stop 41); a new request is clean.
                # Set before _finish, which lets another thread start it
                self._spent = (f"this request's run was stopped by a failed wait_for event "
                               f"({e}); a request with Python layers does not run again after "
                               f"that: create a new request (network.create_request())")
            self._abandon_queue()
            self._finish()
            raise
        if not ready:                       # the run goes on; the request stays busy
            raise ExecutionError(f"the network is still waiting for its wait_for events after "
                                 f"{timeout:g} s; the request is still running (wait again)")
        try:
            if self._own_queue:
                self.queue.finish()
            else:
                run.done.wait()
            if status(run.done) < 0:
                raise ExecutionError(f"the network did not complete (status "
                                     f"{status(run.done)}): a command it waited for failed")
        except (cl.Error, ExecutionError) as e:
            self._abandon_queue()
            self._finish()
            if isinstance(e, ExecutionError):
                raise
            raise ExecutionError(f"the device failed while running the network: {e}") from e
        host_error = None
        if self._host is not None:
            try:                            # the outputs out of their maps; a host step's error
                self._host.finish(run.maps, self.queue)
            except CustomLayersError as e:
                host_error = e
            finally:
                self._finish()
        self._finish()
        if run.check is not None:           # the first run's: elements a kernel never wrote,
            # writes past an output's end; before a Python layer's error, which may be what it
            # made of them (a NaN sentinel passed on)
            run.check.verify(run.checked, run.check_host, self._layer_place)
        if host_error is not None:
            raise host_error
        # network outputs are dense (the compiler reorders custom layers' back): the array
        # read back is the result itself, no second copy
        outputs = {name: (host.reshape(desc.shape) if desc.is_plain else desc.unpack(host))
                   if fresh else host
                   for name, (host, desc, fresh) in run.host_outputs.items()}
        for name in self.plan.boolean_outputs & outputs.keys():   # held as u8 0/1: a view
            if outputs[name].dtype == np.uint8:
                outputs[name] = outputs[name].view(np.bool_)
        return outputs

    def _layer_place(self, step) -> tuple[str, str]:
        """A custom layer described for a message (its name, type and where it is defined),
        and ' (file:line)' of its <WorkSizes> ('' where not known)."""
        registry = self.network.registry
        try:
            spec = registry.spec(step.type) if registry is not None else None
        except KeyError:            # a layer type the registry does not hold by that name
            spec = None
        if spec is None:
            return f"layer '{step.name}' ({step.type})", ""
        sizes = getattr(spec, "work_sizes", None)     # an MVCL layer's are its stages'
        return (f"layer '{step.name}' ({step.type}, defined at {spec.location})",
                f" ({sizes.location})" if sizes is not None else "")

    def _finish(self) -> None:
        # last: once idle, another thread's infer may pick this request and start it
        self._run = None
        self.busy = False

    def _abandon_queue(self) -> None:
        """After a failed dependency some drivers leave the waiting commands queued forever:
        a request with its own queue takes a fresh one, so its next run cannot wait behind
        them."""
        if self._own_queue:
            self.queue = self._make_queue()

    def infer(self, arrays: dict | None = None) -> dict[str, np.ndarray]:
        self.start(arrays or {})
        return self.wait()

    # -- states (a model with ReadValue/Assign: states.py) ----------------------------------
    def query_state(self) -> list[VariableState]:
        """The request's states (OpenVINO's names): each has .name, .state (a numpy copy),
        .set_state(array) and .reset(). They live on the device across this request's runs."""
        return self._states.query()

    def reset_state(self) -> None:
        """Reset every state: the next run reads each ReadValue's init (else zeros)."""
        self._states.reset_all()


def _const_buffer(context, plan, key, unified: bool, queue=None) -> cl.Buffer:
    """The buffer of constant `key`, uploaded by the first request that reads it and shared by
    the plan's later requests. Only what a kernel, a host step or an output reads is uploaded: a
    convolution on a CPU device reads its weights packed (an Arg.const), not as its input 1."""
    cache = plan.constant_buffers
    buf = cache.get(key)
    if buf is None:
        # in the element type the plan gave the tensor (a Const's own, unless folded)
        desc = plan.descs.get(key)
        value = np.ascontiguousarray(plan.consts[key],
                                     dtype=desc.np_dtype if desc is not None else None)
        # setdefault: requests made at once on several threads may both upload; each binds the
        # one buffer kept (a kernel bound to the other would outlive its buffer)
        buf = cache.setdefault(key, constant_buffer(context, value, unified, queue))
    return buf
