"""What a compiled network is made of: steps (one layer, or an inserted reorder, as the
executor runs it) and the plan a request runs (runtime/compiler.py makes it)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..jit.layer import Stage
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
    alias: dict                       # view TensorKey -> the TensorKey whose buffer it shares
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

    def root(self, key):
        while key in self.alias:
            key = self.alias[key]
        return key
