"""What a compiled network is made of: steps (one layer, or an inserted reorder, as the
executor runs it) and the plan a request runs (runtime/compile/compiler.py makes it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ...jit.layer import Stage
from .planner import MemoryPlan

TensorKey = tuple  # (node id, output port), or a tuple naming an inserted tensor ("temp", ...)

# A step is a layer's Stage (jit/layer.py) whose tensors are the plan's keys:
# Arg.input(i) -> step.inputs[i], Arg.output(i) -> step.outputs[i].
Step = Stage


@dataclass
class CompiledPlan:
    """Everything a request needs for one set of concrete input shapes."""
    steps: list[Step]
    descs: dict                       # TensorKey -> TensorDesc
    consts: dict                      # TensorKey -> np.ndarray (uploaded once, shared)
    # view TensorKey -> the TensorKey whose buffer it shares (at byte offset `offsets[key]`,
    # where it has one: the input of a Concat run in place, runtime/compile/concat_in_place.py)
    alias: dict
    inputs: list[tuple[str, TensorKey]]    # network input name -> tensor
    outputs: list[tuple[str, TensorKey]]   # network output name -> tensor
    memory: MemoryPlan
    programs: list                    # per step, per launch: pyopencl.Program
    notes: list = field(default_factory=list)   # the layers' notes (LayerWork.notes)
    # where compiling it went, in seconds: "layers" (shapes, tuning choices, launches),
    # "memory" (the memory plan and its checks), "programs" (built or read from the cache);
    # bench/cold_start.py reports them
    seconds: dict = field(default_factory=dict)
    # device buffers of the constants (by TensorKey) and of Arg.const values (by the Arg's id,
    # with the Arg kept alive beside its buffer): uploaded by the first request that reads them,
    # shared by the later ones
    constant_buffers: dict = field(default_factory=dict, repr=False)
    arg_buffers: dict = field(default_factory=dict, repr=False)
    offsets: dict = field(default_factory=dict)   # aliased TensorKey -> byte offset (above)
    # per Concat that could lie in place: None where it does, else why not (concat_in_place.py)
    in_place: dict = field(default_factory=dict)
    # (bytes each request allocates: slots, inputs, scratch; bytes the constants take once, for
    # all its requests): what requests reserve on the device (device_memory.reserve)
    device_bytes: tuple[int, int] = (0, 0)
    constants_reserved: bool = field(default=False, compare=False, repr=False)
    # the outputs the model declares boolean (held as u8): returned as numpy bool arrays
    boolean_outputs: frozenset = frozenset()
    # the model's variables (ReadValue/Assign): state key (jit/layer.py state_ref) ->
    # TensorDesc, in the order the model first names them; each request owns their buffers
    states: dict = field(default_factory=dict)

    def root(self, key):
        return alias_root(self.alias, key)

    def slice_at(self, key) -> int | None:
        """Where tensor `key` starts in its root's buffer when it is a slice of a Concat's
        output written in place (its kernels are bound to a sub-buffer there, at 0 too: a
        command may not use a buffer and its sub-buffer at once); None when it is the whole
        buffer's tensor (the root itself, or a view of it)."""
        offset, sliced = 0, False
        while key in self.alias:
            if key in self.offsets:
                offset, sliced = offset + self.offsets[key], True
            key = self.alias[key]
        return offset if sliced else None

    @cached_property
    def sliced_roots(self) -> frozenset:
        """The tensors whose buffers hold others at offsets: never bound to a user's buffer."""
        return frozenset(self.root(k) for k in self.offsets)


def alias_root(alias: dict, key):
    """The tensor whose buffer `key` lies in: the end of its chain of aliases (views, fused
    layers, Concat slices)."""
    while key in alias:
        key = alias[key]
    return key
