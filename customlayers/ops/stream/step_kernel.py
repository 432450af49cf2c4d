"""The one OpenCL kernel that computes one step of a StreamProgram for every stream: here its
CPU form (a CPU device: PoCL); the GPU form, which shares each stream's past taps among several
work-groups, is step_gpu.py (over this module's writer).

One work-group per stream n (get_group_id(0)), LOCAL_SIZE work-items. The step, in order:
  1. the input frame into local memory, and, in parallel over (convolution, output channel,
     part), the past-tap sums of every causal convolution at once: they read only the ring
     buffers, not this step's frames, so no convolution of the chain waits for them
     (partial[co] = bias + sum over ci, taps j < k-1 of w * ring[step t-(k-1-j)*d]);
  2. a barrier (the parts of a long sum then added up, and another barrier);
  3. the chain in program order, each op one pass over its channels; a convolution only adds
     its current tap w[co, ci, k-1] * src[ci] to its partial, and writes its input frame into
     its ring slot t mod L (every read of the rings was in 1, before the barrier). A barrier
     stands before an op only where it reads a frame written since the last one by another
     work-item (a convolution's input, a softmax's, a one-channel operand);
  4. the outputs to global memory.
The chain's text, but for a convolution's current tap, is step_chain.py's (both forms share
it). The layouts (step_layout.py) are literals in the text: the kernel is generated per model.
Arguments: params, state [N, S], frame [N, C_in], out [N, O], given (the frames by value where
N * C_in <= INLINE_FLOATS), inlined (whether they are): only `given` changes from one step to
the next (in this form each stream's step count t is in its state, the kernel counts it; the
GPU form's host counts it and gives it in `given`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ModelError
from .program import CausalConv, StreamProgram
from .step_chain import ChainWriter, tree_softmax
from .step_layout import StepLayout, layout

ENTRY = "stream_step"
# the frames of all N streams up to this many floats come by value, in the launch itself (the
# kernel argument `given`), not by an upload before it: one command less per step
INLINE_FLOATS = 64
# a past-tap sum shorter than this many terms per part is not split further
MIN_TERMS_PER_PART = 16


@dataclass(frozen=True)
class StepKernel:
    text: str
    layout: StepLayout
    local_size: int
    local_bytes: int       # the __local memory the kernel declares
    groups: int = 1        # work-groups per stream (the GPU form, step_gpu.py)
    units: int = 0         # the GPU form's floats of scratch per stream (two halves of sums)
    scratch: bool = False  # the GPU form: its arguments end with scratch, `given` with t, side
    entry: str = ENTRY
    prime: str | None = None   # the GPU form's priming kernel, where it sums a step ahead


def choose_local_size(max_group: int, is_cpu: bool, widest: int) -> int:
    """A power of two: on a GPU enough work-items for the widest pass (at least a warp, at most
    256: the chain's passes are a frame's channels wide, and a wider group only makes each
    barrier dearer); on a CPU device (PoCL runs a group's work-items as loops on one core)
    one, whose loops over contiguous channels (_block) its compiler vectorizes: on PoCL the
    seed's TCN step's kernel took 17-22 us at 1, 26-30 at 8, 36-64 at 2, 4 and 16 (N = 1;
    N = 64: 0.85 ms at 1, 0.7-1.4 at 8, 1.7-4.2 at 2, 4 and 16); bench/streaming_tcn.py
    --sweep measures another device."""
    cap = 1 if is_cpu else 256
    size = 1 << max(0, (max(widest, 1) - 1).bit_length())
    size = max(size, 1 if is_cpu else 32)
    size = min(size, cap)
    while size > max(max_group, 1):
        size //= 2
    return max(size, 1)


def step_kernel(program: StreamProgram, *, max_group: int, local_mem: int, is_cpu: bool = False,
                local_size: int | None = None, device: str = "the device",
                groups: int | None = None) -> StepKernel:
    """The kernel text and layouts of one step of `program`: the CPU form below (is_cpu), or
    the GPU form (step_gpu.py: `groups` work-groups per stream share the past taps; None: its
    choice). ModelError when the frames of a step do not fit the device's local memory."""
    program.check()
    convs = program.convolutions
    pairs = sum(program.frames[c.dst] for c in convs)
    widest = max([pairs] + [int(c) for c in program.frames.values()])
    ls = local_size or choose_local_size(max_group, is_cpu, widest)
    if not is_cpu:
        from .step_gpu import gpu_step_kernel
        return gpu_step_kernel(program, local_size=ls, local_mem=local_mem, groups=groups,
                               device=device)
    lay = layout(program)
    parts = {id(c): _parts(c, program, pairs, ls) for c in convs}
    blocks = {id(op): _block(op, program, ls) if is_cpu else 1 for op in program.ops
              if isinstance(op, CausalConv)}
    units = sum(-(-program.frames[c.dst] // blocks[id(c)]) * parts[id(c)] for c in convs)
    if max(blocks.values(), default=1) > 1:
        # a block's loads run up to a block past its weights (never stored): in the buffer
        lay.params = np.concatenate([lay.params, np.zeros(max(blocks.values()), np.float32)])
    split = any(p > 1 for p in parts.values())
    softmax = tree_softmax(program)
    floats = lay.frame_floats + pairs + (units if split else 0) + (ls if softmax else 0)
    nbytes = check_local_memory(program, lay, floats, pairs, local_mem, device)
    text = _Writer(program, lay, ls, parts, pairs, units, split, softmax, blocks).text()
    return StepKernel(text, lay, ls, nbytes)


def check_local_memory(program, lay, floats: int, pairs: int, local_mem: int,
                       device: str) -> int:
    """The bytes of local memory `floats` take; ModelError when the device has fewer."""
    nbytes = 4 * max(floats, 1)
    if nbytes > local_mem:
        raise ModelError(
            f"the streaming step needs {nbytes // 1024} KiB of local memory ("
            f"{len(program.frames)} frames of {lay.frame_floats} floats in all, for "
            f"{len(program.ops)} layers, {len(program.convolutions)} of them causal "
            f"convolutions with {pairs} channels of partial sums); {device} has "
            f"{local_mem // 1024} KiB: run the whole-window network instead")
    return nbytes


def _parts(conv: CausalConv, program: StreamProgram, pairs: int, ls: int) -> int:
    """Into how many parts (over input channels) a convolution's past-tap sum is split: enough
    that the (convolution, channel) pairs fill the work-group, each part still long."""
    if pairs >= ls:
        return 1
    cin_g = conv.weight.shape[1]
    terms = cin_g * (conv.kernel - 1)
    return max(1, min(ls // pairs, cin_g, terms // MIN_TERMS_PER_PART))


def _block(conv: CausalConv, program: StreamProgram, ls: int) -> int:
    """On a CPU device, how many neighbouring output channels one work-item computes:
    ceil(C_out / LS), so that its few work-items each run a loop over contiguous channels its
    compiler vectorizes (grouped, or a work-item per channel: 1). On a GPU every work-item
    takes channels LS apart, so that neighbours read neighbouring weights."""
    cout = program.frames[conv.dst]
    return 1 if conv.groups > 1 or cout <= ls else -(-cout // ls)


class _Writer(ChainWriter):
    """The CPU form's text; the chain's ops other than a convolution are step_chain.py's."""

    def __init__(self, program, lay, ls, parts, pairs, units, split, softmax, blocks):
        super().__init__(program, lay, ls)
        self.blocks = blocks
        self.parts, self.pairs, self.units, self.split = parts, pairs, units, split
        self.softmax = softmax
        base = lay.frame_floats
        self.partial_at = {}                  # id(conv) -> local offset of its partial sums
        at = base
        for c in program.convolutions:
            self.partial_at[id(c)] = at
            at += program.frames[c.dst]
        self.scratch_at = at                  # the parts, when split
        self.reduce_at = at + (units if split else 0)
        self.total = max(self.reduce_at + (ls if softmax else 0), 1)

    def text(self) -> str:
        p = self.p
        self.w(f"// one step of a causal model: {len(p.ops)} ops, "
               f"{len(p.convolutions)} rings, local size {self.ls}")
        self.w(f"#define LS {self.ls}")
        self.w(f"typedef struct {{ float v[{INLINE_FLOATS}]; }} inline_frames;")
        self.w(f"__kernel __attribute__((reqd_work_group_size(LS, 1, 1))) void {ENTRY}(__global const float* restrict params, "
               "__global float* restrict state, __global const float* restrict frame, "
               "__global float* restrict out, const inline_frames given, const int inlined)")
        self.w("{")
        self.w(f"    __local float loc[{self.total}];")
        self.w("    const int lid = get_local_id(0);")
        self.w("    const size_t n = get_group_id(0);")
        self.w(f"    __global float* st = state + n * {max(self.lay.state_floats, 1)};")
        if p.convolutions:
            self.w(f"    __global uint* step = (__global uint*)(st + {self.lay.step_at});")
            self.w("    const uint t = *step;")
        cin = p.input_channels
        self.w(f"    {self.each(cin)} "
               f"{self.f(p.input)}[c] = inlined ? given.v[n * {cin} + c] : "
               f"frame[n * {cin} + c]; }}")
        dirty = {p.input}
        if p.convolutions:
            self._past_taps()
            self.w("    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);")
            dirty = set()
            if self.split:
                self._add_parts()
                self.w("    barrier(CLK_LOCAL_MEM_FENCE);")
        self._chain_and_outputs(dirty)
        if p.convolutions:
            # every work-item read the count before the first barrier
            self.w(f"    if (lid == 0) *step = t + 1 == {self.lay.period}u ? 0u : t + 1;")
        self.w("}")
        return "\n".join(self.lines) + "\n"

    # -- 1: the past taps of every convolution, in parallel over (conv, channel, part) -------
    def _past_taps(self) -> None:
        p, lay = self.p, self.lay
        self.w(f"    for (int u = lid; u < {self.units}; u += LS) {{")
        start = 0
        first = True
        for c in p.convolutions:
            cout = p.frames[c.dst]
            parts, block = self.parts[id(c)], self.blocks[id(c)]
            end = start + -(-cout // block) * parts
            self.w(f"        {'if' if first else 'else if'} (u < {end}) {{")
            first = False
            if block > 1:
                self._past_block(c, start, block)
                start = end
                continue
            cin = p.frames[c.src]
            cin_g, cout_g = c.weight.shape[1], cout // c.groups
            k, d, ring = c.kernel, c.dilation, lay.rings[id(c)]
            params = lay.conv_params[id(c)]
            self.w(f"            const int v = u - {start};")
            self.w(f"            const int co = v % {cout};")
            grp = f"(co / {cout_g}) * {cin_g}" if c.groups > 1 else "0"
            if parts > 1:
                self.w(f"            const int part = v / {cout};")
                self.w(f"            const int lo = part * {cin_g} / {parts}, "
                       f"hi = (part + 1) * {cin_g} / {parts};")
                bias = f"(part == 0 ? params[{params.bias} + co] : 0.0f)" \
                    if params.bias is not None else "0.0f"
            else:
                self.w(f"            const int lo = 0, hi = {cin_g};")
                bias = f"params[{params.bias} + co]" if params.bias is not None else "0.0f"
            self.w(f"            float acc = {bias};")
            self.w(f"            const uint tm = t % {ring.length}u;")
            self.w(f"            for (int j = 0; j < {k - 1}; j++) {{")
            self.w(f"                uint slot = tm + {ring.length}u - (uint)({k - 1} - j) * "
                   f"{d}u;")
            self.w(f"                if (slot >= {ring.length}u) slot -= {ring.length}u;")
            self.w(f"                __global const float* r = st + {ring.offset} + "
                   f"slot * {cin} + {grp};")
            self.w(f"                __global const float* w = params + {params.past} + "
                   f"j * {cin_g * cout} + co;")
            self.w(f"                for (int ci = lo; ci < hi; ci++) "
                   f"acc += w[ci * {cout}] * r[ci];")
            self.w("            }")
            # split: every part to its own place (scratch_at + u), added up in _add_parts
            self.w(f"            loc[{self.scratch_at} + u] = acc;" if self.split else
                   f"            loc[{self.partial_at[id(c)]} + co] = acc;")
            self.w("        }")
            start = end
        self.w("    }")

    def _past_block(self, c: CausalConv, start: int, block: int) -> None:
        """The past taps of `block` neighbouring output channels (groups == 1, no parts)."""
        cout, cin, lay = self.p.frames[c.dst], self.p.frames[c.src], self.lay
        ring, params = lay.rings[id(c)], lay.conv_params[id(c)]
        self.w(f"            const int co0 = (u - {start}) * {block};")
        self._block_start(c, block, f"params[{params.bias} + co0 + q]"
                          if params.bias is not None else "0.0f")
        self.w(f"            const uint tm = t % {ring.length}u;")
        self.w(f"            for (int j = 0; j < {c.kernel - 1}; j++) {{")
        self.w(f"                uint slot = tm + {ring.length}u - (uint)({c.kernel - 1} - j) * "
               f"{c.dilation}u;")
        self.w(f"                if (slot >= {ring.length}u) slot -= {ring.length}u;")
        self.w(f"                __global const float* r = st + {ring.offset} + slot * {cin};")
        self.w(f"                __global const float* w = params + {params.past} + "
               f"j * {cin * cout} + co0;")
        self._block_sum(cin, cout, block, "r[ci]")
        self.w("            }")
        self._block_store(cout, block, f"loc[{self.partial_at[id(c)]} + co0 + q]")
        self.w("        }")

    def _block_start(self, c, block: int, value: str) -> None:
        cout = self.p.frames[c.dst]
        self.w(f"            float acc[{block}];")
        self.w(f"            for (int q = 0; q < {block}; q++) "
               f"acc[q] = co0 + q < {cout} ? {value} : 0.0f;")

    def _block_sum(self, cin: int, cout: int, block: int, source: str) -> None:
        # the channels past C_out of the last block add junk that is never stored
        self.w(f"                for (int ci = 0; ci < {cin}; ci++) {{ const float x = {source}; "
               f"for (int q = 0; q < {block}; q++) acc[q] += w[ci * {cout} + q] * x; }}")

    def _block_store(self, cout: int, block: int, target: str) -> None:
        self.w(f"            for (int q = 0; q < {block} && co0 + q < {cout}; q++) "
               f"{target} = acc[q];")

    def _add_parts(self) -> None:
        start = 0
        for c in self.p.convolutions:
            cout, parts = self.p.frames[c.dst], self.parts[id(c)]
            terms = " + ".join(f"loc[{self.scratch_at + start + j * cout} + co]"
                               for j in range(parts))
            self.w(f"    {self.each(cout, 'co')} "
                   f"loc[{self.partial_at[id(c)]} + co] = {terms}; }}")
            start += cout * parts

    # -- 3: a convolution in the chain (the other ops: step_chain.py) ------------------------
    def _CausalConv(self, c: CausalConv) -> None:
        p, lay = self.p, self.lay
        cout, cin = p.frames[c.dst], p.frames[c.src]
        cin_g, cout_g = c.weight.shape[1], cout // c.groups
        params = lay.conv_params[id(c)]
        grp = f"(co / {cout_g}) * {cin_g}" if c.groups > 1 else "0"
        start = self._conv_start(c)
        block = self.blocks[id(c)]
        if block > 1:
            self.w(f"    {self.each(-(-cout // block), 'b')}")
            self.w(f"            const int co0 = b * {block};")
            self._block_start(c, block, start.replace("co]", "co0 + q]"))
            self.w(f"            __global const float* w = params + {params.current} + co0;")
            self._block_sum(cin, cout, block, f"{self.f(c.src)}[ci]")
            self._block_store(cout, block, f"{self.f(c.dst)}[co0 + q]")
            self.w("    }")
            if self.ls > 1:
                self.blocked.add(c.dst)
        else:
            self.w(f"    {self.each(cout, 'co')}")
            self.w(f"        float acc = {start};")
            self.w(f"        __global const float* w = params + {params.current} + co;")
            self.w(f"        __local const float* s = {self.f(c.src)} + {grp};")
            self.w(f"        for (int ci = 0; ci < {cin_g}; ci++) acc += w[ci * {cout}] * s[ci];")
            self.w(f"        {self.f(c.dst)}[co] = acc;")
            self.w("    }")
        self._ring_write(c)
