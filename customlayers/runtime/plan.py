"""What a compiled network is made of: steps (one layer, or an inserted reorder, as the
executor runs it) and the plan a request runs (runtime/compiler.py makes it)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..jit.tensor import TensorDesc
from .launch import KernelLaunch
from .planner import MemoryPlan

TensorKey = tuple  # (node id, output port), or a tuple naming an inserted tensor ("in", ...)


@dataclass
class Step:
    """One layer (or an inserted reorder) as the executor runs it."""
    name: str
    type: str
    impl: str                         # "custom" | "built-in" | "reorder"
    entry: str
    launches: list[KernelLaunch]
    inputs: list[TensorKey]           # Arg.input(i) -> inputs[i]
    outputs: list[TensorKey]          # Arg.output(i) -> outputs[i]
    input_descs: list[TensorDesc] = field(default_factory=list)
    output_descs: list[TensorDesc] = field(default_factory=list)


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

    def root(self, key):
        while key in self.alias:
            key = self.alias[key]
        return key
