"""Warm-up: the built-in programs built once for a device, into the shared program cache
(device/cache.py), so that a later process finds them on disk instead of compiling them.

What it builds is the plans of a fixed set of probes, each compiled with tuning off (each
layer's heuristic kernel, no timing): the "light" models that the onnx package ships (real
topologies, weights stripped, read as they are: the programs depend on the shapes, not on the
weights' values) and small graphs of one node per (op, variant) in OP_PROBES. Today many
built-in programs are specialised to the shapes they run on, so the warm-up covers exactly the
programs of those models and shapes, and other shapes still compile on first use; once every
built-in program is keyed by op and variant only (issue 22), the same probes cover them all.
To cover a new variant, add its (op, variant) probe to OP_PROBES.

Each model's programs are built in one parallel batch (device/parallel_build.py, via the
compiler), and the op probes of one input shape are branches of one graph, built in one batch
too (a probe that fails is then tried alone, to name it); each network is dropped before the
next.
"""
from __future__ import annotations

import gc
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ...errors import CustomLayersError


@dataclass(frozen=True)
class OpProbe:
    """One (op, variant): `nodes(x)` gives the ONNX nodes and initializers reading the graph
    input `x` of shape `shape` and writing the output named `y`."""
    op: str
    variant: str
    shape: tuple[int, ...]
    nodes: Callable[[str], tuple[list, list]]


@dataclass
class WarmupReport:
    device: str
    probes: list[str] = field(default_factory=list)       # probe names, in order
    failed: list[tuple[str, str]] = field(default_factory=list)   # (probe, why)
    built: int = 0        # programs compiled now
    from_disk: int = 0    # programs the cache already held on disk
    seconds: float = 0.0

    @property
    def programs(self) -> int:
        return self.built + self.from_disk


def _node(op: str, inputs: list[str], **attrs):
    from onnx import helper
    return helper.make_node(op, inputs, ["y"], **attrs)


def _weight(name: str, shape: tuple[int, ...]):
    import numpy as np
    from onnx import numpy_helper
    rng = np.random.default_rng(0)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def _conv(kernel: int, stride: int = 1, group: int = 1, channels: int = 16):
    def nodes(x):
        w = _weight("w", (channels, channels // group, kernel, kernel))
        b = _weight("b", (channels,))
        return [_node("Conv", [x, "w", "b"], kernel_shape=[kernel, kernel],
                      strides=[stride, stride], pads=[kernel // 2] * 4, group=group)], [w, b]
    return nodes


def _unary(op: str, **attrs):
    return lambda x: ([_node(op, [x], **attrs)], [])


def _with_weight(op: str, shape: tuple[int, ...], **attrs):
    return lambda x: ([_node(op, [x, "w"], **attrs)], [_weight("w", shape)])


IMAGE = (1, 16, 14, 14)
MATRIX = (1, 8, 32)
# (op, variant) probes: the op kinds of the common models, in the forms whose programs differ
OP_PROBES: tuple[OpProbe, ...] = (
    OpProbe("Conv", "3x3", IMAGE, _conv(3)),
    OpProbe("Conv", "1x1", IMAGE, _conv(1)),
    OpProbe("Conv", "3x3/stride 2", IMAGE, _conv(3, stride=2)),
    OpProbe("Conv", "depthwise 3x3", IMAGE, _conv(3, group=16)),
    OpProbe("MaxPool", "3x3/stride 2", IMAGE,
            _unary("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    OpProbe("AveragePool", "2x2", IMAGE, _unary("AveragePool", kernel_shape=[2, 2],
                                                 strides=[2, 2])),
    OpProbe("GlobalAveragePool", "", IMAGE, _unary("GlobalAveragePool")),
    OpProbe("Relu", "", IMAGE, _unary("Relu")),
    OpProbe("Sigmoid", "", IMAGE, _unary("Sigmoid")),
    OpProbe("Add", "broadcast per channel", IMAGE, _with_weight("Add", (16, 1, 1))),
    OpProbe("Mul", "broadcast per channel", IMAGE, _with_weight("Mul", (16, 1, 1))),
    OpProbe("Transpose", "NCHW->NHWC", IMAGE, _unary("Transpose", perm=[0, 2, 3, 1])),
    # a GPU's row copies (ops/tensor/transpose.py), where only outer axes move
    OpProbe("Transpose", "outer axes", MATRIX, _unary("Transpose", perm=[1, 0, 2])),
    OpProbe("MatMul", "by a weight", MATRIX, _with_weight("MatMul", (32, 32))),
    OpProbe("Softmax", "last axis", MATRIX, _unary("Softmax", axis=-1)),
    OpProbe("ReduceMean", "last axis", MATRIX, _unary("ReduceMean", axes=[-1], keepdims=1)),
    OpProbe("Tanh", "", MATRIX, _unary("Tanh")),
)


def op_probes_model(probes: list[OpProbe], folder: Path) -> Path:
    """The probes (of one input shape) as one ONNX model file in `folder` (opset 17): each
    probe a branch reading the input `x`, its output and weights suffixed by its index, so that
    one network builds all their programs in one parallel batch."""
    import onnx
    from onnx import TensorProto, helper
    (shape,) = {p.shape for p in probes}
    nodes, inits, outputs = [], [], []
    for i, probe in enumerate(probes):
        ns, ws = probe.nodes("x")
        for n in ns:
            n.input[:] = [f"{name}{i}" if name != "x" else name for name in n.input]
            n.output[:] = [f"{name}{i}" for name in n.output]
        for w in ws:
            w.name = f"{w.name}{i}"
        nodes += ns
        inits += ws
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph(nodes, "warmup probes", [x], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / f"probes-{len(list(folder.iterdir()))}.onnx"
    onnx.save(onnx.shape_inference.infer_shapes(model), str(path))
    return path


def light_models() -> list[Path]:
    """The light models of the installed onnx package (onnx/backend/test/data/light), sorted
    by name; none when the package ships no test data."""
    try:
        import onnx
    except ImportError:
        return []
    return sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light")
                  .glob("light_*.onnx"))


def probe_names(models: Iterable[Path] | None = None,
                ops: Iterable[OpProbe] = OP_PROBES) -> list[str]:
    names = [f"model {p.stem.removeprefix('light_')}" for p in
             (light_models() if models is None else models)]
    return names + [f"op {p.op}" + (f" ({p.variant})" if p.variant else "") for p in ops]


def _compile(engine, model: Path) -> None:
    """The model's default plan with tuning off, then dropped: its buffers and kernels go before
    the next probe's (a collection, for the cycles that would hold them late)."""
    from .network import Network
    try:
        Network(model, engine=engine, tuning="off")
    finally:
        gc.collect()


def warm_up(engine, models: Iterable[Path] | None = None, ops: Iterable[OpProbe] = OP_PROBES,
            say: Callable[[str], None] = lambda m: None) -> WarmupReport:
    """Compile every probe's plan on `engine` with tuning off, through its program cache.
    `models`: model files (default: light_models()); `ops`: the (op, variant) probes. A probe
    that fails is recorded in the report (and said), and the others still run."""
    models = light_models() if models is None else list(models)
    ops = list(ops)
    cache = engine.cache
    misses, disk = cache.misses, cache.disk_hits
    report = WarmupReport(engine.device.name.strip())
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="customlayers-warmup-") as tmp:
        jobs = [(name, [], (lambda p=p: p)) for name, p in zip(probe_names(models, ()), models)]
        for shape in dict.fromkeys(o.shape for o in ops):
            group = [o for o in ops if o.shape == shape]
            jobs.append((f"{len(group)} op probes of shape {shape}", group,
                         lambda g=group: op_probes_model(g, Path(tmp))))
        while jobs:
            name, group, model = jobs.pop(0)
            before = cache.misses + cache.disk_hits
            t = time.perf_counter()
            try:
                _compile(engine, model())
            except (CustomLayersError, OSError) as e:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
                if len(group) > 1:      # which of them: each alone
                    jobs[:0] = [(probe_names((), [o])[0], [o],
                                 lambda o=o: op_probes_model([o], Path(tmp))) for o in group]
                    continue
                report.failed.append((name, why))
                say(f"{name}: failed: {why}")
                continue
            report.probes += probe_names((), group) if group else [name]
            say(f"{name}: {cache.misses + cache.disk_hits - before} programs in "
                f"{time.perf_counter() - t:.1f} s")
    report.built = cache.misses - misses
    report.from_disk = cache.disk_hits - disk
    report.seconds = time.perf_counter() - start
    return report
