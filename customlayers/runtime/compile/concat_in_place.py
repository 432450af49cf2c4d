"""Concat in place: the layers that compute a Concat's inputs write straight into their slices
of its output, and the Concat runs no kernel (clDNN optimizes its concatenations the same way).

A Concat whose axis has only dims of 1 before it (the channels of a batch of one, or axis 0)
lays its inputs end to end: input i is the bytes [o_i, o_i + n_i) of the output
(LayerImpl.input_offsets). Such an input placed there becomes an alias of the output at byte
offset o_i (CompiledPlan.alias and .offsets). Nothing else has to know:
- every kernel that writes or reads the input is bound to a sub-buffer of the output's buffer
  at that origin (request.py), so the producers need no change of their own;
- the memory planner sees one tensor, the output, living from the first producer's write to
  the last read of the output or of any of its slices (plan_buffers.plan_memory_of);
- commands are ordered by the memory they touch (ordering.py): a reader of the output waits for
  every producer, since each of them writes its buffer.
Concats nest: the output of one in place can be an input of the next (DenseNet concatenates each
block's features one layer at a time), and all of them then lie in the last one's buffer.

A Concat goes in place only when every input can, and copies as before otherwise (its output a
network output included: the user may hand a buffer of its own for it). An input can when it is
a tensor that built-in kernels compute (not a network input or output, a constant, the work of
a custom or Python layer, or a view of another shape), dense, given once, placed in no other
Concat, and its slice starts where the device allows a sub-buffer to
(CL_DEVICE_MEM_BASE_ADDR_ALIGN). Its other readers are no concern: they read the slice.
`InPlaceConcats.decisions` says, per Concat, why not, where it did not.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .plan import Step, alias_root

# what a profile shows as the kernel of a layer that runs in place: it runs none
IN_PLACE_ENTRY = "(in place)"


def runs_in_place(step: Step) -> bool:
    return step.entry == IN_PLACE_ENTRY and not step.launches and step.host is None


@dataclass(frozen=True)
class ConcatCandidate:
    """A step whose output 0 is its inputs laid end to end, at these byte offsets."""
    step: int
    offsets: tuple[int, ...]


@dataclass
class InPlaceConcats:
    steps: list[Step]
    alias: dict = field(default_factory=dict)      # placed tensor -> the Concat output it is in
    offsets: dict = field(default_factory=dict)    # placed tensor -> its byte offset there
    decisions: dict = field(default_factory=dict)  # Concat layer name -> None (in place) | why not


def place_concat_inputs(steps: list[Step], candidates: list[ConcatCandidate], descs: dict,
                        alias: dict, consts: dict, input_keys, output_keys,
                        alignment: int) -> InPlaceConcats:
    """Which candidates run in place, in step order (an inner Concat before the one it feeds),
    and the steps with those Concats' launches removed. `alias` (views and fused layers) is
    read, not changed; `alignment`: the bytes a sub-buffer's origin must be a multiple of."""
    def root(key):
        return alias_root(alias, key)

    result = InPlaceConcats(list(steps))
    writers: dict = {}                 # root tensor -> the indices of the steps that write it
    for index, step in enumerate(steps):
        for key in step.outputs:
            writers.setdefault(root(key), []).append(index)
    network_inputs = set(input_keys)
    # tensors a network output is read from (through views): the user may give a buffer of
    # its own for them, and the read-back takes a whole buffer
    network_outputs = {root(k) for k in output_keys}
    for candidate in candidates:
        step = steps[candidate.step]
        out = step.outputs[0]
        why = _why_not(step, candidate, result, writers, descs, consts, root, network_inputs,
                       network_outputs, alignment)
        result.decisions[step.name] = why
        if why is not None:
            continue
        for key, offset in zip(step.inputs, candidate.offsets):
            placed = root(key)
            result.alias[placed] = out
            result.offsets[placed] = offset
        result.steps[candidate.step] = replace(step, launches=[], entry=IN_PLACE_ENTRY)
    return result


def _why_not(step: Step, candidate: ConcatCandidate, placed: InPlaceConcats, writers, descs,
             consts, root, network_inputs, network_outputs, alignment: int) -> str | None:
    """None when the Concat can run in place; else why not, for its decision."""
    if alignment <= 0:
        return "in-place Concats are off"
    out = step.outputs[0]
    if out in network_outputs:
        return "its output is a network output"
    if not descs[out].is_plain:
        return "its output is not dense"
    seen: dict = {}
    for i, (key, offset) in enumerate(zip(step.inputs, candidate.offsets)):
        r = root(key)
        if r in seen:
            return f"input {i} is input {seen[r]} again"
        seen[r] = i
        if r in consts:
            return f"input {i} is a constant"
        if r in network_inputs:
            return f"input {i} is a network input"
        if r in network_outputs:
            return f"input {i} is a network output"
        if r in placed.alias:
            return f"input {i} is already written into another Concat's output"
        desc = descs[r]
        if tuple(desc.shape) != tuple(descs[key].shape):
            # a Reshape's view: its tensor could lie there as well, but stay with the plain case
            return f"input {i} is a view of a tensor of another shape"
        if not desc.is_plain or desc.nbytes == 0 or desc.nbytes != descs[key].nbytes:
            return f"input {i} is not a dense, non-empty tensor"
        for w in writers.get(r, ()):
            writer = placed.steps[w]
            if writer.host is not None:
                return f"input {i} is computed on the host ('{writer.name}')"
            if writer.impl != "built-in":
                # custom kernels keep buffers of their own: the user's code, run as written
                return f"input {i} is computed by a {writer.impl} layer ('{writer.name}')"
            if not writer.launches and not runs_in_place(writer):
                return f"input {i} is computed by no kernel ('{writer.name}')"
        if not writers.get(r):
            return f"input {i} is computed by no step"
        if offset % alignment:
            return (f"input {i} would start at byte {offset}, which is not a multiple of the "
                    f"device's sub-buffer alignment ({alignment} bytes)")
    return None
