"""The chain's text in the step kernel, shared by its CPU form (step_kernel.py) and its GPU
form (step_gpu.py): the ops in program order, each one pass over its channels, a barrier only
before an op that reads another work-item's writes, then the outputs to global memory.

A form's writer subclasses ChainWriter: it sets `reduce_at` (the local offset of a softmax's
reduction tree) and `partial_at` (id(conv) -> the local offset of its partial sums), and
writes a convolution itself (`_CausalConv`: its current tap, then `_ring_write`); a form that
writes a frame in blocks of channels (several per work-item) adds it to `blocked`.
"""
from __future__ import annotations

from .program import (Binary, CausalConv, ChannelSlice, ChannelSoftmax, Pointwise,
                      StreamProgram)
from .step_exprs import BINARY_CL, POINTWISE_CL, literal
from .step_layout import StepLayout

# a softmax over at most this many channels is computed by every work-item alone (no tree)
SERIAL_SOFTMAX = 32


def tree_softmax(program: StreamProgram) -> bool:
    """Whether a softmax of `program` reduces through a tree in local memory (one over more
    than SERIAL_SOFTMAX channels): the kernel then keeps LS floats for it."""
    return any(isinstance(op, ChannelSoftmax) and program.frames[op.dst] > SERIAL_SOFTMAX
               for op in program.ops)


class ChainWriter:
    def __init__(self, program: StreamProgram, lay: StepLayout, ls: int):
        self.p, self.lay, self.ls = program, lay, ls
        self.blocked: set = set()             # frames written in blocks by several work-items
        self.lines: list[str] = []

    def w(self, line: str) -> None:
        self.lines.append(line)

    def f(self, name: str) -> str:
        return f"(loc + {self.lay.frames[name]})"

    def each(self, count: int, var: str = "c") -> str:
        """The head of a pass of the work-items over `count` items, `var` the item (close it
        with "}"): where count <= LS, one `if` (a work-item has at most one item), else a loop
        striding by LS. In a chain that one warp walks, NVIDIA's compiler made each loop a
        string of branches and counts that the warp waited on: the seed TCN's step took
        10.8 k cycles of chain with ifs against 21.4 k with loops, on an H100."""
        if count <= self.ls:
            return f"if (lid < {count}) {{ const int {var} = lid;"
        return f"for (int {var} = lid; {var} < {count}; {var} += LS) {{"

    def _chain_and_outputs(self, dirty: set) -> None:
        """The ops in program order (a barrier where one reads another work-item's writes,
        `dirty`: the frames written since the last), then the outputs."""
        p = self.p
        for op in p.ops:
            if self._crosses(op, dirty):
                self.w("    barrier(CLK_LOCAL_MEM_FENCE);")
                dirty = set()
            self.w(f"    // {type(op).__name__} {op.name or op.dst}")
            getattr(self, "_" + type(op).__name__)(op)
            dirty.add(op.dst)
        if any(o.frame in dirty & self.blocked for o in self.lay.outputs):
            self.w("    barrier(CLK_LOCAL_MEM_FENCE);")
        for o in self.lay.outputs:
            self.w(f"    {self.each(o.size)} "
                   f"out[n * {max(self.lay.output_floats, 1)} + {o.offset} + c] = "
                   f"{self.f(o.frame)}[c]; }}")

    def _crosses(self, op, dirty) -> bool:
        """Whether `op` reads a frame written since the last barrier by another work-item:
        a pass over C channels has work-item c % LS write channel c, so an op over the same
        channels reads its own work-item's writes."""
        if isinstance(op, (CausalConv, ChannelSoftmax, ChannelSlice)):
            return op.src in dirty
        if isinstance(op, Pointwise):
            return op.src in dirty & self.blocked
        c = self.p.frames[op.dst]
        return any(r in dirty and (self.p.frames[r] != c or r in self.blocked)
                   for r in (op.a, op.b) if r)

    # -- a convolution's start and its ring (its current tap is the form's) -----------------
    def _conv_start(self, c: CausalConv) -> str:
        """What output channel co's sum starts from: its partial (bias and past taps), else
        its bias, else 0."""
        if c.history:
            return f"loc[{self.partial_at[id(c)]} + co]"
        bias = self.lay.conv_params[id(c)].bias
        return f"params[{bias} + co]" if bias is not None else "0.0f"

    def _ring_write(self, c: CausalConv) -> None:
        """The convolution's input frame into its ring slot t mod L (after every read of the
        rings: the past taps ran before the chain)."""
        if c.history:
            ring, cin = self.lay.rings[id(c)], self.p.frames[c.src]
            self.w(f"    {self.each(cin)} st[{ring.offset} + "
                   f"(t % {ring.length}u) * {ring.stride} + c] = {self.f(c.src)}[c]; }}")

    # -- the other ops -----------------------------------------------------------------------
    def _Pointwise(self, op: Pointwise) -> None:
        expr = POINTWISE_CL[op.kind].format(*[literal(v) for v in op.params])
        ch = self.p.frames[op.dst]
        self.w(f"    {self.each(ch)} const float x = "
               f"{self.f(op.src)}[c]; {self.f(op.dst)}[c] = {expr}; }}")

    def _ChannelSlice(self, op: ChannelSlice) -> None:
        ch = self.p.frames[op.dst]
        self.w(f"    {self.each(ch)} "
               f"{self.f(op.dst)}[c] = {self.f(op.src)}[{op.start} + c * {op.step}]; }}")

    def _Binary(self, op: Binary) -> None:
        ch = self.p.frames[op.dst]

        def operand(frame):
            return f"{self.f(frame)}[{'c' if self.p.frames[frame] == ch else '0'}]"
        a = operand(op.a)
        if op.b is not None:
            b = operand(op.b)
        elif op.constant.size == 1:
            b = literal(op.constant.reshape(-1)[0])
        else:
            b = f"params[{self.lay.constants[id(op)]} + c]"
        if op.constant_first:
            a, b = b, a
        self.w(f"    {self.each(ch)} "
               f"{self.f(op.dst)}[c] = {BINARY_CL[op.kind].format(a, b)}; }}")

    def _ChannelSoftmax(self, op: ChannelSoftmax) -> None:
        ch, src, dst, red = self.p.frames[op.dst], self.f(op.src), self.f(op.dst), self.reduce_at
        value = f"{src}[c] - m - log(s)" if op.log else f"exp({src}[c] - m) / s"
        self.w("    {")
        if ch <= SERIAL_SOFTMAX:
            # every work-item reads all the channels: no barrier (a classifier's 10 classes
            # took 12 barriers as a tree in a group of 256)
            self.w("        float m = -INFINITY, s = 0.0f;")
            self.w(f"        for (int c = 0; c < {ch}; c++) m = fmax(m, {src}[c]);")
            self.w(f"        for (int c = 0; c < {ch}; c++) s += exp({src}[c] - m);")
            self.w(f"        {self.each(ch)} {dst}[c] = {value}; }}")
            self.w("    }")
            return
        # the first `width` work-items reduce (a tree of log2(width) barriers, not log2(LS))
        width = min(self.ls, 1 << max(0, (ch - 1).bit_length()))
        self.w("        float m = -INFINITY;")
        self.w(f"        for (int c = lid; c < {ch} && lid < {width}; c += {width}) "
               f"m = fmax(m, {src}[c]);")
        self._reduce("m", "fmax(loc[{r} + lid], loc[{r} + lid + h])", red, width)
        self.w("        float s = 0.0f;")
        self.w(f"        for (int c = lid; c < {ch} && lid < {width}; c += {width}) "
               f"s += exp({src}[c] - m);")
        self._reduce("s", "loc[{r} + lid] + loc[{r} + lid + h]", red, width)
        self.w(f"        {self.each(ch)} {dst}[c] = {value}; }}")
        self.w("    }")

    def _reduce(self, var: str, combine: str, red: int, width: int) -> None:
        """`var` of the first `width` work-items, by a tree in local memory; every work-item
        then holds the result."""
        self.w(f"        if (lid < {width}) loc[{red} + lid] = {var};")
        self.w("        barrier(CLK_LOCAL_MEM_FENCE);")
        self.w(f"        for (int h = {width} / 2; h > 0; h /= 2) {{")
        self.w(f"            if (lid < h) loc[{red} + lid] = {combine.format(r=red)};")
        self.w("            barrier(CLK_LOCAL_MEM_FENCE);")
        self.w("        }")
        self.w(f"        {var} = loc[{red}];")
        self.w("        barrier(CLK_LOCAL_MEM_FENCE);")
