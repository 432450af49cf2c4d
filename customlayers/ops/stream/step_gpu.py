"""The step kernel's GPU form: one work-group per stream walks the chain at once, while others
compute the next step's past taps.

One work-group per stream running a whole step (step_kernel.py's form) waits for its past taps,
one dot product per (convolution, tap, output channel), before its chain (the seed's TCN: 2400
dot products of 25 floats). Here the past taps are one step ahead: a tap of offset o = (k-1-j)*d
>= 2 of step t+1 reads the input of step t+1-o <= t-1, already in the ring when step t runs.
So per stream, GROUPS work-groups (GROUPS > 1):
  - the chain group (get_group_id(0) = n, the first N groups): its partials are bias + the
    past-tap sums that step t-1's other groups left in the stream's scratch half `side` (the
    step's parity), plus, for a convolution of dilation 1, its tap of offset 1 (the input of step
    t-1: a dot product, read from the ring at once); then the chain as in step_kernel.py, a
    convolution adding its current tap as one dot product of its row with its input frame
    (float4s from local memory), its input frame then written into its ring slot t mod L. The
    chain runs one convolution after another, so a row read where it is used is a wait on
    global memory in every link: a work-item that holds a whole row loads it PREFETCH
    convolutions ahead, into registers; then the outputs;
  - the other GROUPS - 1 (N + n * (GROUPS - 1) + p): the past-tap sums of step t+1 (offset
    >= 2) into the other half of the scratch, one (convolution, output channel) a work-item.
    They read ring slots of steps t-L+1 .. t-1, the chain writes the slot of step t: no group
    waits for another (the kernel's end is the only join), where the last form (every group
    the current step's taps, an atomic count, the last group the chain) kept the chain waiting
    2.3 us for them on an H100. The seed TCN's step kernel on an H100: 14.4 -> 12.3 us at
    N = 1, 19.7-19.8 -> 15.7-17.1 us at N = 64 (bench/streaming_tcn.py, interleaved).
The step number t (modulo the rings' period) and the half `side` come by value at the end of
`given`, counted by the host (runtime/streaming/causal_stream.py). A second kernel,
PRIME_ENTRY, makes step t's sums from the rings into half `side`, with no chain: after a reset,
a set_state or new buffers, before the next step (a kernel of its own: a branch that skipped
the step's barriers ran wrongly on PoCL; none where no convolution sums ahead, kernel 2 and
dilation 1 alone).
GROUPS = 1 is one group doing the chain, then the next step's sums, with no branch: a CPU
device's (its runtime refuses several there: PoCL ran barriers after the other groups' return,
and inside the last form's group-uniform branch, wrongly; a CPU gains nothing from several).
Arguments: step_kernel.py's (`given` ends with t and side), then scratch [N, 2, S] (S: the
sums of a step); PRIME_ENTRY's: params, state, scratch, t, side.
"""
from __future__ import annotations

from .program import CausalConv, StreamProgram
from .step_chain import tree_softmax
from .step_kernel import ENTRY, INLINE_FLOATS, StepKernel, _Writer, check_local_memory
from .step_layout import layout

# the GPU form's second kernel, which makes a step's sums from the rings (after a reset, ...)
PRIME_ENTRY = "stream_prime"

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


def early_taps(conv: CausalConv) -> int:
    """How many of a convolution's past taps (j < k-1, offset (k-1-j)*d) are summed a step
    ahead: those of offset >= 2 (all of them where d >= 2; the one of offset 1 is the chain's)."""
    taps = conv.kernel - 1
    return taps if conv.dilation >= 2 else max(taps - 1, 0)


def ahead_sums(program: StreamProgram) -> int:
    """The sums a step leaves for the next, per stream: one per (convolution with early taps,
    output channel)."""
    return sum(program.frames[c.dst] for c in program.convolutions if early_taps(c))


def gpu_step_kernel(program: StreamProgram, *, local_size: int, local_mem: int,
                    groups: int | None, device: str) -> StepKernel:
    """The GPU form's text and layouts; groups None: the chain group and enough others that
    every sum of the next step has a work-item (at most MAX_GROUPS in all)."""
    lay = layout(program, rows=True)
    sums = ahead_sums(program)
    if groups is None:
        groups = min(MAX_GROUPS, 1 + -(-sums // local_size)) if sums else 1
    pairs = sum(program.frames[c.dst] for c in program.convolutions)
    softmax = tree_softmax(program)
    floats = lay.frame_floats + pairs + (local_size if softmax else 0)
    nbytes = check_local_memory(program, lay, floats, pairs, local_mem, device)
    text = _GpuWriter(program, lay, local_size, groups, sums, softmax).text()
    return StepKernel(text, lay, local_size, nbytes, groups=groups, units=2 * sums,
                      scratch=True, prime=PRIME_ENTRY if sums else None)


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
    def __init__(self, program, lay, ls, groups, sums, softmax):
        convs = program.convolutions
        pairs = sum(program.frames[c.dst] for c in convs)
        super().__init__(program, lay, ls, {id(c): 1 for c in convs}, pairs, 0, False,
                         softmax, {id(op): 1 for op in program.ops
                                   if isinstance(op, CausalConv)})
        self.groups, self.sums = groups, sums
        # id(conv) -> where its sums start in a scratch half (the convolutions with early taps)
        self.sum_at, at = {}, 0
        for c in convs:
            if early_taps(c):
                self.sum_at[id(c)] = at
                at += program.frames[c.dst]
        self.reduce_at = self.scratch_at
        self.total = max(self.reduce_at + (ls if softmax else 0), 1)
        # the chain's convolutions whose row a work-item holds whole in registers (dense,
        # C_out <= LS, a row of at most REGISTER_ROW floats), id -> their order: each row is
        # loaded PREFETCH of them ahead of its use. (Copying every row into local memory at
        # the start instead, where 48 KiB held all but one of the seed TCN's: its step's kernel
        # took 14.7-14.8 us against 11.6 on an H200.)
        held = [op for op in program.ops if isinstance(op, CausalConv) and op.groups == 1 and
                program.frames[op.dst] <= ls and lay.conv_params[id(op)].row <= REGISTER_ROW] \
            if PREFETCH and ls <= REGISTER_ROWS_LS else []
        self.in_registers = {id(op): j for j, op in enumerate(held)}
        self.held = held

    def text(self) -> str:
        p, g = self.p, self.groups
        self.w(f"// one step of a causal model, GPU form: {len(p.ops)} ops, "
               f"{len(p.convolutions)} rings, {self.sums} sums a step ahead, {g} group(s) of "
               f"{self.ls} per stream")
        self.w(f"#define LS {self.ls}")
        self.w(f"typedef struct {{ float v[{INLINE_FLOATS}]; uint t; uint side; }} "
               f"inline_frames;")
        self.w(f"__kernel __attribute__((reqd_work_group_size(LS, 1, 1))) void {ENTRY}("
               "__global const float* restrict params, __global float* restrict state, "
               "__global const float* restrict frame, __global float* restrict out, "
               "const inline_frames given, const int inlined, __global float* scratch)")
        self.w("{")
        # 16-byte aligned: the frames are at multiples of 4 floats, read as float4s
        self.w(f"    __local float loc[{self.total}] __attribute__((aligned(16)));")
        self.w("    const int lid = get_local_id(0);")
        self.w("    const uint t = given.t, side = given.side;")
        self.w("    const int gid = get_group_id(0);")
        ahead = bool(self.sums)                  # (sums a step ahead need convolutions)
        if g > 1:
            # (a GPU's only: PoCL ran barriers after such a return wrongly)
            self.w(f"    const int streams = get_num_groups(0) / {g};")
            self.w("    if (gid >= streams) {        // the next step's sums")
            self.w(f"        const int n = (gid - streams) / {g - 1}, "
                   f"p = (gid - streams) % {g - 1};")
            self._ahead_sums(g - 1, prime=False)
            self.w("        return;")
            self.w("    }")
        self.w("    const int n = gid;")
        self.w(f"    __global float* st = state + n * {max(self.lay.state_floats, 1)};")
        if p.convolutions:
            self._partials()
            # a tap of offset 1 read a ring row that the chain's ring writes may overwrite
            # (a ring of one step): a global fence too
            late = any(early_taps(c) < c.kernel - 1 for c in p.convolutions)
            self.w("    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);" if late else
                   "    barrier(CLK_LOCAL_MEM_FENCE);")
        cin = p.input_channels
        self.w(f"    {self.each(cin)} "
               f"{self.f(p.input)}[c] = inlined ? given.v[n * {cin} + c] : "
               f"frame[n * {cin} + c]; }}")
        for c in self.held[:PREFETCH]:
            self._load_row(c)
        self._chain_and_outputs({p.input})
        if g == 1 and ahead:
            # the next step's sums read slots the chain did not write (steps t-L+1 .. t-1)
            self.w("    { const int p = 0;")
            self._ahead_sums(1, prime=False)
            self.w("    }")
        self.w("}")
        if ahead:
            self._priming_kernel(max(g - 1, 1))
        return "\n".join(self.lines) + "\n"

    def _priming_kernel(self, workers: int) -> None:
        """PRIME_ENTRY: step t's sums from the rings into half `side`, after a reset, a
        set_state or new buffers, before the step (a kernel of its own: a branch around the
        step's barriers ran wrongly on PoCL); `workers` groups per stream."""
        self.w(f"__kernel __attribute__((reqd_work_group_size(LS, 1, 1))) void {PRIME_ENTRY}("
               "__global const float* restrict params, __global const float* restrict state, "
               "__global float* scratch, const uint t, const uint side)")
        self.w("{")
        self.w("    const int lid = get_local_id(0);")
        self.w(f"    const int n = get_group_id(0) / {workers}, "
               f"p = get_group_id(0) % {workers};")
        self.w("    {")
        self._ahead_sums(workers, prime=True)
        self.w("    }")
        self.w("}")

    # -- the past taps of offset >= 2, a step ahead ------------------------------------------
    def _ahead_sums(self, workers: int, prime: bool) -> None:
        """Stream n's sums, work-group p of `workers`: of step t+1 into the half the next step
        reads (prime: step t's into its own half), one (convolution, output channel) a
        work-item: over the early taps j, the dot product of its weight row and the ring row
        of step t' - (k-1-j)*d (t' the step summed for)."""
        p, lay, indent = self.p, self.lay, "        "
        period, sums = self.lay.period, self.sums
        self.w(f"{indent}const uint ts = " +
               ("t;" if prime else f"t + 1u == {period}u ? 0u : t + 1u;"))
        self.w(f"{indent}__global const float* st = state + n * "
               f"{max(self.lay.state_floats, 1)};")
        self.w(f"{indent}__global float* sc = scratch + n * {2 * sums} + "
               f"{'side' if prime else '(side ^ 1u)'} * {sums};")
        self.w(f"{indent}for (int u = p * LS + lid; u < {sums}; u += {workers} * LS) {{")
        first = True
        for c in p.convolutions:
            early = early_taps(c)
            if not early:
                continue
            cout, taps, at = p.frames[c.dst], c.kernel - 1, self.sum_at[id(c)]
            self.w(f"{indent}    {'if' if first else 'else if'} (u < {at + cout}) {{")
            first = False
            cin_g, cout_g = c.weight.shape[1], cout // c.groups
            ring, params = lay.rings[id(c)], lay.conv_params[id(c)]
            grp = f" + (co / {cout_g}) * {cin_g}" if c.groups > 1 else ""
            self.w(f"{indent}        const int co = u - {at};")
            self.w(f"{indent}        const uint tm = ts % {ring.length}u;")
            self.w(f"{indent}        float acc = 0.0f;")
            self.w(f"{indent}        for (int j = 0; j < {early}; j++) {{")
            self.w(f"{indent}            uint slot = tm + {ring.length}u - "
                   f"(uint)({taps} - j) * {c.dilation}u;")
            self.w(f"{indent}            if (slot >= {ring.length}u) slot -= {ring.length}u;")
            self.w(f"{indent}            __global const float* r = st + {ring.offset} + "
                   f"slot * {ring.stride}{grp};")
            self.w(f"{indent}            __global const float* w = params + {params.past} + "
                   f"(j * {cout} + co) * {params.row};")
            for line in _dot("w", "r", cin_g, vector=c.groups == 1):
                self.w(f"{indent}            " + line)
            self.w(f"{indent}        }}")
            self.w(f"{indent}        sc[u] = acc;")
            self.w(f"{indent}    }}")
        self.w(f"{indent}}}")

    def _partials(self) -> None:
        """partial[co] = bias + the sums step t-1 left (in half `side`) + for a convolution
        of dilation 1 its tap of offset 1 (the ring's slot of step t-1), a pass per
        convolution over its output channels (with C_out <= LS: one `if`, so a work-item issues
        every convolution's loads before it waits)."""
        sums, lay = self.sums, self.lay
        if sums:
            self.w(f"    __global const float* sn = scratch + n * {2 * sums} + "
                   f"side * {sums};")
        for c in self.p.convolutions:
            cout, taps = self.p.frames[c.dst], c.kernel - 1
            params, ring = lay.conv_params[id(c)], lay.rings[id(c)]
            terms = [f"params[{params.bias} + co]"] if params.bias is not None else []
            if early_taps(c):
                terms.append(f"sn[{self.sum_at[id(c)]} + co]")
            self.w(f"    {self.each(cout, 'co')}")
            if early_taps(c) < taps:               # the tap of offset 1 (d = 1), j = k-2
                cin_g, cout_g = c.weight.shape[1], cout // c.groups
                grp = f" + (co / {cout_g}) * {cin_g}" if c.groups > 1 else ""
                self.w(f"        const uint tm = t % {ring.length}u;")
                self.w(f"        __global const float* r = st + {ring.offset} + "
                       f"(tm == 0u ? {ring.length - 1}u : tm - 1u) * {ring.stride}{grp};")
                self.w(f"        __global const float* w = params + {params.past} + "
                       f"({taps - 1} * {cout} + co) * {params.row};")
                self.w("        float acc = 0.0f;")
                for line in _dot("w", "r", cin_g, vector=c.groups == 1):
                    self.w("        " + line)
                terms.append("acc")
            self.w(f"        loc[{self.partial_at[id(c)]} + co] = "
                   f"{' + '.join(terms) or '0.0f'};")
            self.w("    }")

    # -- 4: a convolution's current tap ------------------------------------------------------
    def _load_row(self, c: CausalConv) -> None:
        """Work-item co's row of `c`'s current tap into registers r<j>_<float4>. (Loaded by
        every work-item, those past C_out the last row, to spare the zeros and the branch:
        the seed TCN's step kernel took 13.2-13.7 us against 11.5-12.1 on an H100.)"""
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
