"""Small graphs for the interop tests, built directly (no OpenVINO needed, so they also run on
the GPU machine), with their numpy references."""
from __future__ import annotations

import numpy as np

from customlayers.graph.graph import Graph, Node, Port

SHAPE = (2, 5, 7, 9)


class Builder:
    def __init__(self, name: str = "interop"):
        self.g = Graph(name)
        self.n = 0

    def _id(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def param(self, name: str, shape=SHAPE, dtype: str = "f32") -> tuple:
        self.g.add_node(Node(name, name, "Parameter", outputs=[Port(tuple(shape), dtype, (name,))]))
        return name, tuple(shape)

    def const(self, value) -> tuple:
        value = np.asarray(value)
        nid = self._id("c")
        dtype = {"float32": "f32", "int64": "i64"}[str(value.dtype)]
        self.g.add_node(Node(nid, nid, "Const", outputs=[Port(value.shape, dtype)], value=value))
        return nid, value.shape

    def op(self, type_: str, inputs: list, shape, attrs=None, name: str | None = None) -> tuple:
        nid = name or self._id(type_.lower())
        names = (name,) if name else ()
        self.g.add_node(Node(nid, nid, type_, dict(attrs or {}),
                             [Port(tuple(s), "f32") for _, s in inputs],
                             [Port(tuple(shape), "f32", names)]))
        for port, (src, _) in enumerate(inputs):
            self.g.connect(src, 0, nid, port)
        return nid, tuple(shape)

    def relu_shift(self, x: tuple, shift: float, name: str | None = None) -> tuple:
        """relu(x - shift): two built-in layers (fusion may make them one kernel)."""
        added = self.op("Add", [x, self.const(np.float32(-shift))], x[1])
        return self.op("ReLU", [added], x[1], name=name)

    def reshape(self, x: tuple, shape, name: str | None = None) -> tuple:
        return self.op("Reshape", [x, self.const(np.array(shape, np.int64))], shape,
                       {"special_zero": "false"}, name=name)

    def result(self, x: tuple) -> None:
        nid = self._id("out")
        self.g.add_node(Node(nid, nid, "Result", inputs=[Port(x[1], "f32")]))
        self.g.connect(x[0], 0, nid, 0)


def relu_shift_ref(x: np.ndarray, *shifts: float) -> np.ndarray:
    for s in shifts:
        x = np.maximum(x - np.float32(s), 0)
    return x


def chain(n: int = 4) -> Graph:
    """x -> n times relu(. - 0.1) -> y: enough layers that the planner reuses buffers."""
    b = Builder("chain")
    y = b.param("x")
    for i in range(n):
        y = b.relu_shift(y, 0.1, name="y" if i == n - 1 else None)
    b.result(y)
    return b.g


def chain_ref(x: np.ndarray, n: int = 4) -> np.ndarray:
    return relu_shift_ref(x, *[0.1] * n)


def two_outputs() -> Graph:
    """a = relu(x - 0.1) is an output and is read again: b = relu(a - 0.2), also an output."""
    b = Builder("two")
    x = b.param("x")
    a = b.relu_shift(x, 0.1, name="a")
    out_b = b.relu_shift(a, 0.2, name="b")
    b.result(a)
    b.result(out_b)
    return b.g


def view_output() -> Graph:
    """y = reshape(relu(x - 0.1)): the output is a view of the ReLU's tensor."""
    b = Builder("view")
    x = b.param("x")
    r = b.relu_shift(x, 0.1)
    b.result(b.reshape(r, (2, 315), name="y"))
    return b.g


def input_view() -> Graph:
    """y = reshape(x): the output is the input's memory (nothing computes it)."""
    b = Builder("input_view")
    x = b.param("x")
    b.result(b.reshape(x, (2, 315), name="y"))
    return b.g
