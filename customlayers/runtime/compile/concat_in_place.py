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
- commands are ordered by the memory they touch (execute/run.py): a reader of the output waits for
  every producer, since each of them writes its buffer.
Concats nest: the output of one in place can be an input of the next (DenseNet concatenates each
block's features one layer at a time), and all of them then lie in the last one's buffer.
Concats also chain by prefix: where a Concat's inputs are the first inputs of a later one, at
the same offsets (torchvision's DenseNet joins all the block's features anew at each layer:
62 Concats, 593 copies an inference), the later one is placed first and the earlier one's
output is the front of its output, the earlier Concat running in place too (prefix_of).

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
    """Which candidates run in place, in step order (an inner Concat before the one it feeds;
    a Concat that is the front of a longer one after it), and the steps with those Concats'
    launches removed. `alias` (views and fused layers) is
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
    fronts = prefix_of(steps, candidates, root)

    def place(candidate: ConcatCandidate) -> None:
        step = steps[candidate.step]
        why = _why_not(step, candidate, result, writers, descs, consts, root, network_inputs,
                       network_outputs, alignment)
        result.decisions[step.name] = why
        if why is None:
            for key, offset in zip(step.inputs, candidate.offsets):
                result.alias[root(key)] = step.outputs[0]
                result.offsets[root(key)] = offset
            result.steps[candidate.step] = replace(step, launches=[], entry=IN_PLACE_ENTRY)

    # the longest of each prefix chain first, in step order; then the shorter ones, longest
    # first, each the front of a longer one's output where that one went in place
    for candidate in candidates:
        if candidate.step not in fronts:
            place(candidate)
    for candidate in sorted((c for c in candidates if c.step in fronts),
                            key=lambda c: -len(c.offsets)):
        step = steps[candidate.step]
        out = step.outputs[0]
        if _why_not_a_front(step, candidate, result, descs, root, network_outputs) is not None:
            place(candidate)            # by itself (its longer one copies), or it copies
            continue
        result.decisions[step.name] = None
        result.alias[out] = result.alias[root(step.inputs[0])]
        result.offsets[out] = 0
        result.steps[candidate.step] = replace(step, launches=[], entry=IN_PLACE_ENTRY)
    return result


def prefix_of(steps: list[Step], candidates: list[ConcatCandidate], root) -> set[int]:
    """The steps of the candidates whose inputs (their tensors) are the first inputs of a later
    candidate with more of them, at the same offsets: each the front of a longer one."""
    inputs = {c.step: tuple(zip(map(root, steps[c.step].inputs), c.offsets))
              for c in candidates if c.offsets}
    by_first: dict = {}
    for step, laid in inputs.items():
        by_first.setdefault(laid[0], []).append(step)
    fronts = set()
    for group in by_first.values():
        for step in group:
            mine = inputs[step]
            if any(later > step and len(inputs[later]) > len(mine) and
                   inputs[later][:len(mine)] == mine for later in group):
                fronts.add(step)
    return fronts


def _why_not_a_front(step: Step, candidate: ConcatCandidate, placed: InPlaceConcats, descs,
                     root, network_outputs) -> str | None:
    """None when the Concat's output can be the front of the Concat output its inputs were
    placed in (each at its own offset there, plus one common start); else why not."""
    out = step.outputs[0]
    why = _why_not_its_output(out, descs, network_outputs)
    if why is not None:
        return why
    if out in placed.alias:
        return "its output is already written into another Concat's output"
    roots = [root(key) for key in step.inputs]
    where = {placed.alias.get(r) for r in roots}
    if len(where) != 1 or None in where:
        return "its inputs do not all lie in one longer Concat's output"
    starts = {placed.offsets[r] - offset for r, offset in zip(roots, candidate.offsets)}
    if len(starts) != 1:
        return "its inputs do not lie in the longer Concat's output in its own order"
    if starts.pop() != 0:
        return "its inputs are not the front of the longer Concat's output"
    return None


def _why_not(step: Step, candidate: ConcatCandidate, placed: InPlaceConcats, writers, descs,
             consts, root, network_inputs, network_outputs, alignment: int) -> str | None:
    """None when the Concat can run in place; else why not, for its decision."""
    if alignment <= 0:
        return "in-place Concats are off"
    why = _why_not_its_output(step.outputs[0], descs, network_outputs)
    if why is not None:
        return why
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


def _why_not_its_output(out, descs, network_outputs) -> str | None:
    """Why a Concat's output cannot hold its inputs in place (None: it can): a network output
    (the user may hand a buffer of their own, and the read-back takes a whole one), or not
    dense."""
    if out in network_outputs:
        return "its output is a network output"
    if not descs[out].is_plain:
        return "its output is not dense"
    return None
