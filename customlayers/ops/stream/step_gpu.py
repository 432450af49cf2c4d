"""The step kernel's GPU form: each stream's past taps shared by several work-groups.

One work-group per stream (step_kernel.py's form) runs a step on one compute unit: its past
taps, one dot product per (convolution, tap, output channel), then wait on memory one after
another (the seed's TCN: 2400 dot products of 25 floats, 40 of its 72 us on an H200). Here
GROUPS work-groups per stream (get_group_id(0) = n * GROUPS + g) share them:
  1. every work-item of the stream's groups takes units (convolution, tap j < k-1, output
     channel): the dot product of a weight row and a ring row, float4s (step_layout.py's rows
     form: padded and aligned), written to the stream's scratch row in global memory. These
     read only the rings, not this step's frames;
  2. each group counts itself done (an atomic count per stream, after a fence of its writes:
     the pattern of CUDA's threadFenceReduction); the last one goes on, the others end (the
     rest of the kernel inside `if (last)`), and it resets the count for the next step;
  3. the partials: bias + the taps of each (convolution, output channel), in one pass;
  4. the chain as in step_kernel.py, a convolution adding its current tap as one dot product
     of its row with its input frame (float4s from local memory), its input frame then
     written into its ring slot t mod L (every read of the rings was in 1, before the count).
     The chain runs one convolution after another, so a row read where it is used is a wait
     on global memory in every link: a work-item that holds a whole row loads it PREFETCH
     convolutions ahead, into registers;
  5. the outputs.
Arguments: step_kernel.py's, then scratch [N, units] (the past taps) and counts [N] (ints,
zero between steps).

One group per stream (GROUPS = 1: the count left out) is the same kernel on a CPU device: PoCL
ran the last group's chain (barriers inside a group-uniform branch) wrongly, so a CPU device
never gets several (runtime/streaming/causal_stream.py refuses them).
"""
from __future__ import annotations

from .program import CausalConv, StreamProgram
from .step_chain import tree_softmax
from .step_kernel import ENTRY, INLINE_FLOATS, StepKernel, _Writer, check_local_memory
from .step_layout import layout

# at most this many work-groups share one stream's past taps
MAX_GROUPS = 64
# the chain loads a convolution's current-tap row into registers this many convolutions ahead
# of its use (0: each row where it is used): on an H200 the seed's TCN step's kernel took 21-22
# us at 2 against 23-24 at 0 (N = 1), 29-30 against 31-32 (N = 64); 1 and 3 were no better
PREFETCH = 2
# ... rows of at most this many floats, in groups of at most REGISTER_ROWS_LS work-items:
# PREFETCH + 1 rows live at once (the seed's TCN's rows of 28 took the kernel from 64 to 128
# registers a work-item); a larger group allows fewer registers each (reqd_work_group_size)
REGISTER_ROW = 32
REGISTER_ROWS_LS = 256


def past_units(program: StreamProgram) -> int:
    """One per (convolution with history, tap j < k-1, output channel)."""
    return sum(program.frames[c.dst] * (c.kernel - 1) for c in program.convolutions)


def gpu_step_kernel(program: StreamProgram, *, local_size: int, local_mem: int,
                    groups: int | None, device: str) -> StepKernel:
    """The GPU form's text and layouts; groups None: enough that every past-tap unit has a
    work-item (at most MAX_GROUPS)."""
    lay = layout(program, rows=True)
    units = past_units(program)
    if groups is None:
        groups = max(1, min(MAX_GROUPS, -(-units // local_size))) if program.convolutions \
            else 1
    pairs = sum(program.frames[c.dst] for c in program.convolutions)
    softmax = tree_softmax(program)
    floats = lay.frame_floats + pairs + 1 + (local_size if softmax else 0)
    nbytes = check_local_memory(program, lay, floats, pairs, local_mem, device)
    text = _GpuWriter(program, lay, local_size, groups, units, softmax).text()
    return StepKernel(text, lay, local_size, nbytes, groups=groups, units=units, scratch=True)


# the four lanes of a float4 sum a4, added up
LANES_SUM = "(a4.x + a4.y) + (a4.z + a4.w)"


def float4_at(pointer: str, index: str, space: str = "__global") -> str:
    """The index-th float4 at a float pointer that is 16-byte aligned (the rows layout's
    blocks, rows and rings; the local frames): one vector load, where vload4 (which may
    assume only a float's alignment) compiled to four scalar loads on NVIDIA's OpenCL."""
    return f"(({space} const float4*)({pointer}))[{index}]"


def _dot(w: str, x: str, n: int, vector: bool, x_space: str = "__global") -> list[str]:
    """Lines adding the dot product of n floats at w and x to `acc` (w in global memory, x in
    x_space): float4s over the aligned part where both rows are 16-byte aligned, summed in
    four lanes (four short chains of dependent adds, not one long one), then the rest one by
    one."""
    n4 = n // 4 if vector else 0
    lines = ["{ float4 a4 = (float4)(0.0f);",
             f"  for (int i = 0; i < {n4}; i++) a4 = fma({float4_at(w, 'i')}, "
             f"{float4_at(x, 'i', x_space)}, a4);",
             f"  acc += {LANES_SUM}; }}"] if n4 else []
    if n - 4 * n4:
        lines.append(f"for (int i = {4 * n4}; i < {n}; i++) acc += {w}[i] * {x}[i];")
    return lines


class _GpuWriter(_Writer):
    def __init__(self, program, lay, ls, groups, units, softmax):
        convs = program.convolutions
        pairs = sum(program.frames[c.dst] for c in convs)
        super().__init__(program, lay, ls, {id(c): 1 for c in convs}, pairs, units, False,
                         softmax, {id(op): 1 for op in program.ops
                                   if isinstance(op, CausalConv)})
        self.groups = groups
        # the chain's convolutions whose row a work-item holds whole in registers (dense,
        # C_out <= LS, a row of at most REGISTER_ROW floats), id -> their order: each row is
        # loaded PREFETCH of them ahead of its use
        held = [op for op in program.ops if isinstance(op, CausalConv) and op.groups == 1 and
                program.frames[op.dst] <= ls and lay.conv_params[id(op)].row <= REGISTER_ROW] \
            if PREFETCH and ls <= REGISTER_ROWS_LS else []
        self.in_registers = {id(op): j for j, op in enumerate(held)}
        self.held = held
        self.last_at = self.scratch_at            # whether this group is the stream's last
        self.reduce_at = self.last_at + 1
        self.total = max(self.reduce_at + (ls if softmax else 0), 1)

    def text(self) -> str:
        p, g = self.p, self.groups
        self.w(f"// one step of a causal model, GPU form: {len(p.ops)} ops, "
               f"{len(p.convolutions)} rings, {self.units} past-tap units, {g} group(s) of "
               f"{self.ls} per stream")
        self.w(f"#define LS {self.ls}")
        self.w(f"typedef struct {{ float v[{INLINE_FLOATS}]; }} inline_frames;")
        self.w(f"__kernel __attribute__((reqd_work_group_size(LS, 1, 1))) void {ENTRY}("
               "__global const float* restrict params, __global float* restrict state, "
               "__global const float* restrict frame, __global float* restrict out, "
               "const inline_frames given, const int inlined, __global float* scratch, "
               "__global int* counts)")
        self.w("{")
        # 16-byte aligned: the frames are at multiples of 4 floats, read as float4s
        self.w(f"    __local float loc[{self.total}] __attribute__((aligned(16)));")
        self.w("    const int lid = get_local_id(0);")
        self.w(f"    const int n = get_group_id(0) / {g};")
        self.w(f"    const int g = get_group_id(0) % {g};")
        self.w(f"    __global float* st = state + n * {max(self.lay.state_floats, 1)};")
        if p.convolutions:
            self.w(f"    __global uint* step = (__global uint*)(st + {self.lay.step_at});")
            self.w("    const uint t = *step;")
            self.w(f"    __global float* sc = scratch + n * {max(self.units, 1)};")
            self._past_taps()
            if g > 1:
                self._last_group_only()
            else:
                self.w("    barrier(CLK_GLOBAL_MEM_FENCE);")
            self._partials()
            self.w("    barrier(CLK_LOCAL_MEM_FENCE);")
        cin = p.input_channels
        self.w(f"    {self.each(cin)} "
               f"{self.f(p.input)}[c] = inlined ? given.v[n * {cin} + c] : "
               f"frame[n * {cin} + c]; }}")
        for c in self.held[:PREFETCH]:
            self._load_row(c)
        self._chain_and_outputs({p.input})
        if p.convolutions:
            # every work-item read the count at the start
            self.w(f"    if (lid == 0) *step = t + 1 == {self.lay.period}u ? 0u : t + 1;")
            if g > 1:
                self.w("    }  // the last group")
        self.w("}")
        return "\n".join(self.lines) + "\n"

    # -- 1: one dot product per (convolution, tap, output channel) ---------------------------
    def _past_taps(self) -> None:
        p, lay = self.p, self.lay
        self.w(f"    for (int u = g * LS + lid; u < {self.units}; u += {self.groups} * LS) {{")
        start, first = 0, True
        for c in p.convolutions:
            cout, taps = p.frames[c.dst], c.kernel - 1
            end = start + cout * taps
            self.w(f"        {'if' if first else 'else if'} (u < {end}) {{")
            first = False
            cin_g, cout_g = c.weight.shape[1], cout // c.groups
            ring, params = lay.rings[id(c)], lay.conv_params[id(c)]
            self.w(f"            const int v = u - {start};")
            self.w(f"            const int j = v / {cout}, co = v % {cout};")
            self.w(f"            uint slot = t % {ring.length}u + {ring.length}u - "
                   f"(uint)({taps} - j) * {c.dilation}u;")
            self.w(f"            if (slot >= {ring.length}u) slot -= {ring.length}u;")
            grp = f" + (co / {cout_g}) * {cin_g}" if c.groups > 1 else ""
            self.w(f"            __global const float* r = st + {ring.offset} + "
                   f"slot * {ring.stride}{grp};")
            self.w(f"            __global const float* w = params + {params.past} + "
                   f"v * {params.row};")
            self.w("            float acc = 0.0f;")
            for line in _dot("w", "r", cin_g, vector=c.groups == 1):
                self.w("            " + line)
            self.w("            sc[u] = acc;")
            self.w("        }")
            start = end
        self.w("    }")

    def _last_group_only(self) -> None:
        self.w("    mem_fence(CLK_GLOBAL_MEM_FENCE);")
        self.w("    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);")
        self.w(f"    if (lid == 0) loc[{self.last_at}] = "
               f"atomic_inc(counts + n) == {self.groups - 1} ? 1.0f : 0.0f;")
        self.w("    barrier(CLK_LOCAL_MEM_FENCE);")
        self.w(f"    if (loc[{self.last_at}] != 0.0f) {{")
        self.w("    if (lid == 0) atomic_xchg(counts + n, 0);")
        self.w("    mem_fence(CLK_GLOBAL_MEM_FENCE);")

    def _partials(self) -> None:
        """partial[co] = bias + the past taps, a pass per convolution over its output
        channels (with C_out <= LS: one `if`, so a work-item issues every convolution's loads
        before it waits; one pass over every pair, a chain of branches per pair, took twice as
        long on an H100); read past the L1 (volatile): other groups wrote them."""
        self.w("    { volatile __global const float* vs = sc;")
        start = 0
        for c in self.p.convolutions:
            cout, taps = self.p.frames[c.dst], c.kernel - 1
            params = self.lay.conv_params[id(c)]
            terms = " + ".join(f"vs[{start + j * cout} + co]" for j in range(taps))
            bias = f"params[{params.bias} + co] + " if params.bias is not None else ""
            self.w(f"    {self.each(cout, 'co')} loc[{self.partial_at[id(c)]} + co] = "
                   f"{bias}{terms}; }}")
            start += cout * taps
        self.w("    }")

    # -- 4: a convolution's current tap ------------------------------------------------------
    def _load_row(self, c: CausalConv) -> None:
        """Work-item co's row of `c`'s current tap into registers r<j>_<float4>."""
        j, row = self.in_registers[id(c)], self.lay.conv_params[id(c)].row
        at = self.lay.conv_params[id(c)].current
        for i in range(row // 4):
            self.w(f"    const float4 r{j}_{i} = lid < {self.p.frames[c.dst]} ? "
                   f"{float4_at(f'params + {at}', f'lid * {row // 4} + {i}')} : (float4)(0.0f);")

    def _conv_from_registers(self, c: CausalConv) -> None:
        """The current tap from the registers _load_row loaded (after the row PREFETCH ahead
        is loaded): C_out <= LS, so work-item co is output channel co; the source's last
        float4 past C_in is its padding (no number): its lanes there are zeros."""
        j, row, cin = self.in_registers[id(c)], self.lay.conv_params[id(c)].row, c.weight.shape[1]
        for nxt in self.held[j + PREFETCH:j + PREFETCH + 1]:
            self._load_row(nxt)
        src = self.f(c.src)
        self.w(f"    if (lid < {self.p.frames[c.dst]}) {{")
        self.w("        const int co = lid;")
        self.w(f"        float acc = {self._conv_start(c)};")
        self.w("        float4 a4 = (float4)(0.0f);")
        for i in range(row // 4):
            if 4 * i + 4 <= cin:
                x = float4_at(src, str(i), "__local")
            else:
                x = "(float4)(" + ", ".join(f"{src}[{4 * i + k}]" if 4 * i + k < cin else "0.0f"
                                            for k in range(4)) + ")"
            self.w(f"        a4 = fma(r{j}_{i}, {x}, a4);")
        self.w(f"        {self.f(c.dst)}[co] = acc + {LANES_SUM};")
        self.w("    }")
        self._ring_write(c)

    def _CausalConv(self, c: CausalConv) -> None:
        if id(c) in self.in_registers:
            self._conv_from_registers(c)
            return
        p, lay = self.p, self.lay
        cout = p.frames[c.dst]
        cin_g, cout_g = c.weight.shape[1], cout // c.groups
        params = lay.conv_params[id(c)]
        grp = f" + (co / {cout_g}) * {cin_g}" if c.groups > 1 else ""
        self.w(f"    {self.each(cout, 'co')}")
        self.w(f"        float acc = {self._conv_start(c)};")
        self.w(f"        __global const float* w = params + {params.current} + co * "
               f"{params.row};")
        self.w(f"        __local const float* s = {self.f(c.src)}{grp};")
        for line in _dot("w", "s", cin_g, vector=c.groups == 1, x_space="__local"):
            self.w("        " + line)
        self.w(f"        {self.f(c.dst)}[co] = acc;")
        self.w("    }")
        self._ring_write(c)
