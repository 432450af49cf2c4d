"""The layers that only re-index their input (Reshape, Squeeze, Unsqueeze, Transpose, a Gather of
one constant index) composed into one strided view of the buffer they start from: where a chain
of them feeds a MatMul, the MatMul reads the chain's first tensor through the view and no layer
of the chain copies anything (passes/view_folding.py; the MatMul's fact ops/nn/matmul.py's
OperandViews).

An axis of a ComposedView is a list of parts, (size, stride) pairs in mixed radix, outermost
first: a Reshape that merges axes the buffer does not walk evenly (torch's head split merges the
batch with the heads, [S, B, 3D] to [S, B*H, d]) still has a view, which a later Reshape or
Transpose can split back into axes of one stride each. Only the view the MatMul finally reads
must give every axis one stride (`linear`). Pure: no device, no graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ._program import LinearView

Part = tuple[int, int]                  # (size, stride)


@dataclass(frozen=True)
class ComposedView:
    axes: tuple[tuple[Part, ...], ...]  # per axis its parts, outermost first; () for size 1
    offset: int = 0

    @staticmethod
    def of(view: LinearView) -> "ComposedView":
        return ComposedView(tuple(((d, s),) if d != 1 else () for d, s in
                                  zip(view.shape, view.strides)), view.offset)

    @property
    def shape(self) -> tuple[int, ...]:
        out = []
        for parts in self.axes:
            size = 1
            for n, _ in parts:
                size *= n
            out.append(size)
        return tuple(out)

    def transpose(self, order: Sequence[int]) -> "ComposedView":
        return ComposedView(tuple(self.axes[a] for a in order), self.offset)

    def reshape(self, shape: Sequence[int]) -> "ComposedView | None":
        """Read as `shape` (same count, row-major order); None where a new axis would need part
        of an old part that its size does not divide."""
        parts = [p for axis in self.axes for p in axis]
        axes: list[tuple[Part, ...]] = []
        for d in (int(v) for v in shape):
            taken: list[Part] = []
            need = d
            while need > 1:
                if not parts:
                    return None
                n, s = parts[0]
                if need % n == 0:
                    taken.append(parts.pop(0))
                    need //= n
                elif n % need == 0:
                    taken.append((need, s * (n // need)))
                    parts[0] = (n // need, s)
                    need = 1
                else:
                    return None
            if d == 0:
                return None             # an empty tensor has no view worth folding
            axes.append(tuple(taken))
        return None if parts else ComposedView(tuple(axes), self.offset)

    def select(self, axis: int, index: int) -> "ComposedView":
        """Element `index` of `axis` (a Gather of one scalar index): that axis dropped."""
        offset = self.offset
        for n, s in reversed(self.axes[axis]):
            offset += (index % n) * s
            index //= n
        return ComposedView(self.axes[:axis] + self.axes[axis + 1:], offset)

    def linear(self) -> LinearView | None:
        """The view with one stride per axis, or None where an axis's parts are not evenly
        spaced."""
        strides = []
        for parts in self.axes:
            for (n1, s1), (n2, s2) in zip(parts, parts[1:]):
                if s1 != n2 * s2:
                    return None
            strides.append(parts[-1][1] if parts else 0)
        return LinearView(self.shape, tuple(strides), self.offset)


def reshaped(view: LinearView, shape: Sequence[int]) -> LinearView | None:
    """`view` read as `shape` with one stride per axis (numpy's reshape without a copy), or
    None where that needs a copy."""
    composed = ComposedView.of(view).reshape(shape)
    return composed.linear() if composed is not None else None
