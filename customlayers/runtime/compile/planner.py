"""Memory planning by tensor lifetime.

Every intermediate tensor lives from the step that writes it to the last step that reads it. Two
tensors whose lifetimes do not overlap can share one device buffer; the in-order queue makes the
reuse safe (a kernel that overwrites a buffer runs after every earlier reader has finished); on
an out-of-order queue the request orders it with events (execute/run.py).
The plan is pure data: slot sizes and, for each tensor, its slot. Requests allocate one buffer
per slot.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TensorLife:
    key: object        # caller's identifier of the tensor
    nbytes: int
    first: int         # step that writes it
    last: int          # last step that reads it (>= first)


@dataclass
class MemoryPlan:
    slot_sizes: list[int] = field(default_factory=list)
    slot_of: dict = field(default_factory=dict)    # tensor key -> slot index
    total_tensor_bytes: int = 0                    # what one buffer per tensor would take
    # tensors with no buffer of their own, written in place into a Concat's output (counted in
    # total_tensor_bytes, whose buffers they would have had)
    in_place_tensors: int = 0
    # tensor key -> bytes its slot holds after it: the guard zone of a custom kernel's output,
    # which a request's first run checks (execute/unwritten.py)
    guards: dict = field(default_factory=dict)

    @property
    def planned_bytes(self) -> int:
        return sum(self.slot_sizes)

    def summary(self) -> str:
        total, planned = self.total_tensor_bytes, self.planned_bytes
        ratio = planned / total if total else 1.0
        in_place = (f" (and {self.in_place_tensors} more written in place into Concat outputs)"
                    if self.in_place_tensors else "")
        return (f"planned device memory {_mib(planned)} for {len(self.slot_of)} intermediate "
                f"tensors{in_place} in {len(self.slot_sizes)} buffers, against {_mib(total)} for "
                f"one buffer per tensor ({ratio:.0%})")


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def plan_memory(lives: list[TensorLife], alignment: int = 256) -> MemoryPlan:
    """Greedy best fit in order of first use: a tensor takes the smallest free slot that holds it,
    else grows the largest free slot (cheaper than a new one), else opens a new slot."""
    plan = MemoryPlan(total_tensor_bytes=sum(t.nbytes for t in lives))
    busy_until: list[int] = []      # per slot: last step of its current tenant
    for t in sorted(lives, key=lambda t: (t.first, -t.nbytes)):
        need = -(-max(t.nbytes, 1) // alignment) * alignment
        free = [s for s, until in enumerate(busy_until) if until < t.first]
        fitting = [s for s in free if plan.slot_sizes[s] >= need]
        if fitting:
            slot = min(fitting, key=lambda s: plan.slot_sizes[s])
        elif free:
            slot = max(free, key=lambda s: plan.slot_sizes[s])
            plan.slot_sizes[slot] = need
        else:
            slot = len(plan.slot_sizes)
            plan.slot_sizes.append(need)
            busy_until.append(-1)
        busy_until[slot] = t.last
        plan.slot_of[t.key] = slot
    return plan
