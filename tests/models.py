"""The ONNX "light" models, with real weights, as ONNX and as OpenVINO IR, made once per machine.

The onnx package ships onnx/backend/test/data/light/*.onnx: real topologies (ResNet-50,
SqueezeNet, ...) whose weights are stripped to save space. Each float weight is either an
initializer or a ConstantOfShape of a shape initializer filled with 0.02. Constant weights make a
poor test (every channel alike), so every float weight becomes seeded random values of the same
shape, scaled by its role so activations stay O(1): conv/gemm weights normal * sqrt(2 / fan_in),
biases small, BatchNorm scale near 1 and variance positive (see _random_for_role). The result is saved as
`<name>.onnx` and converted with openvino to `<name>.xml/.bin` (float32 kept: no fp16 compression).

Files live in <repo>/.cache/models/<MODELS_VERSION>/ (git-ignored); bump the version whenever this
recipe changes, and every machine regenerates. Each file is written to a temporary name and moved
into place, so parallel test processes never see half a file.

    light_onnx("resnet50") -> Path        light_ir("resnet50") -> Path (.xml)
    light_model_names() -> list of names   all_light_ir() -> list of .xml paths
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

MODELS_VERSION = "light-v2"
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "models" / MODELS_VERSION
SEED = 20240611


def _light_dir() -> Path:
    import onnx
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_model_names() -> list[str]:
    return sorted(p.stem[len("light_"):] for p in _light_dir().glob("light_*.onnx"))


def light_onnx(name: str) -> Path:
    """The randomized ONNX model (made on first use)."""
    path = CACHE / f"{name}.onnx"
    if not path.exists():
        import onnx
        _write_checked(path, randomize_weights(
            onnx.load(str(_light_dir() / f"light_{name}.onnx")), SEED, check=False))
    return path


def light_ir(name: str) -> Path:
    """The randomized model converted to OpenVINO IR; returns the .xml path (made on first use)."""
    xml = CACHE / f"{name}.xml"
    if not xml.exists():
        import openvino as ov
        model = ov.convert_model(str(light_onnx(name)))
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            ov.save_model(model, str(Path(tmp) / "m.xml"), compress_to_fp16=False)
            os.replace(Path(tmp) / "m.bin", CACHE / f"{name}.bin")   # .bin first: the .xml
            os.replace(Path(tmp) / "m.xml", xml)                      # marks a complete pair
    return xml


TORCHVISION = ROOT / "bench" / "data" / "torchvision"


def torchvision_names() -> list[str]:
    """torchvision models exported by torch.onnx.export (opset 17, TorchScript exporter) on the
    GPU machine by bench/export_torchvision.py, their float weights stripped (dims kept)."""
    return sorted(p.stem[len("tv_"):] for p in TORCHVISION.glob("tv_*.onnx"))


def torchvision_onnx(name: str) -> Path:
    """The exported torchvision model with its weights drawn by the recipe below (made on
    first use)."""
    path = CACHE / f"tv_{name}.onnx"
    if not path.exists():
        import onnx
        _write_checked(path, randomize_weights(
            onnx.load(str(TORCHVISION / f"tv_{name}.onnx")), SEED, check=False))
    return path


def all_light_ir() -> list[Path]:
    return [light_ir(n) for n in light_model_names()]


# -- the weight recipe ------------------------------------------------------------------------
def randomize_weights(model, seed: int, check: bool = True):
    """Replace every float weight (initializer or ConstantOfShape of a constant shape) by seeded
    random values of the same shape; drop initializers from the graph inputs so converters treat
    them as constants. Changes `model` in place and returns it (every caller passes one it has
    just loaded). Memory: VGG-19's weights (548 MB as float32) were copied whole, drawn as
    float64 arrays, then built as a list and copied into the graph again: its first use peaked at
    2.3 GB, and the whole-model tests on an empty model cache at 2.65 GB (a fresh clone's
    `make test`: 3.06 GB). Now the old weights are dropped first, each new one is drawn in
    float64 chunks into float32 (_drawn) and goes into the graph as it is drawn: 1.7 GB and
    2.12 GB. The same values in the same order as before (the cached files stay byte for byte
    what they were). `check`: onnx's checker on the result here (it
    serializes the model once more: _write_checked checks the written file instead)."""
    import onnx
    from onnx import numpy_helper

    graph = model.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in graph.initializer}
    uses = _uses(graph)

    weights: dict[str, tuple[int, ...]] = {}       # float weight name -> shape
    keep_nodes = []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and value.data_type == onnx.TensorProto.FLOAT:
                shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
                weights[node.output[0]] = shape
                continue
        keep_nodes.append(node)
    for t in graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            weights[t.name] = tuple(t.dims)
    init_names = set(inits)
    # unused now: shape initializers that only fed the ConstantOfShape nodes
    used = {i for n in keep_nodes for i in n.input} | {o.name for o in graph.output}
    others = [t for t in graph.initializer if t.name not in weights and t.name in used]
    del inits
    del graph.node[:]
    graph.node.extend(keep_nodes)
    del graph.initializer[:]                      # the old float weights go here
    graph.initializer.extend(others)
    for name in sorted(weights):      # sorted: the same values whatever the file order
        shape = weights[name]
        data = _random_for_role(rng, shape, _role(name, uses), uses).tobytes()  # (drawn
        if name in used:                          # even where unused: the generator's order)
            tensor = graph.initializer.add()      # numpy_helper.from_array's fields
            tensor.name, tensor.data_type = name, onnx.TensorProto.FLOAT
            tensor.dims.extend(shape)
            tensor.raw_data = data
        del data
    real_inputs = [i for i in graph.input if i.name not in weights and i.name not in init_names]
    del graph.input[:]
    graph.input.extend(real_inputs)
    # IR version 4 (ONNX 1.4, the opset-9 era) is the first that allows initializers that are
    # not graph inputs.
    model.ir_version = max(model.ir_version, 4)
    if check:
        onnx.checker.check_model(model)
    return model


def _uses(graph) -> dict[str, list[tuple[str, int, object]]]:
    """tensor name -> [(consumer op_type, input index, node)], looking through Unsqueeze/Reshape
    (DenseNet unsqueezes its per-channel scale before the Mul)."""
    direct: dict[str, list] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            direct.setdefault(name, []).append((node.op_type, i, node))
    result = {}
    for name in direct:
        seen, todo, found = set(), [name], []
        while todo:
            t = todo.pop()
            for use in direct.get(t, ()):
                if use[0] in ("Unsqueeze", "Reshape") and use[1] == 0 and use[2].output[0] not in seen:
                    seen.add(use[2].output[0])
                    todo.append(use[2].output[0])
                else:
                    found.append(use)
        result[name] = found
    return result


def _role(name: str, uses) -> tuple[str, object]:
    for op, index, node in uses.get(name, ()):
        if op == "Conv" and index == 1:
            return "conv_w", node
        if op == "Gemm" and index == 1:
            return "gemm_w", node
        if op == "MatMul" and index == 1:
            return "matmul_w", node
        if op == "BatchNormalization":
            return ("bn_scale", "bn_bias", "bn_mean", "bn_var")[index - 1], node
        if op == "Mul":
            return "scale", node
    return "bias", None


def _random_for_role(rng, shape: tuple[int, ...], role, uses) -> np.ndarray:
    kind, node = role
    if kind in ("conv_w", "gemm_w", "matmul_w"):
        if kind == "conv_w":
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        elif kind == "gemm_w":
            trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
            fan_in = shape[1] if trans_b else shape[0]
        else:
            fan_in = shape[0]
        # He scaling keeps plain conv+ReLU stacks (VGG) at O(1). Before a BatchNorm, whose random
        # statistics do not normalize anything, 1/fan_in keeps residual sums (ResNet) from
        # growing ~1.5x per block.
        gain = 1.0 if kind == "conv_w" and _feeds_batchnorm(node, uses) else 2.0
        return _drawn(shape, lambda n: rng.standard_normal(n) * np.sqrt(gain / max(fan_in, 1)))
    if kind in ("bn_scale", "scale"):
        return _drawn(shape, lambda n: rng.uniform(0.8, 1.2, n))
    if kind == "bn_var":
        return _drawn(shape, lambda n: rng.uniform(0.5, 1.5, n))    # positive: under a sqrt
    return _drawn(shape, lambda n: rng.standard_normal(n) * 0.1)    # biases, BN bias and mean


DRAW_CHUNK = 1 << 22


def _drawn(shape: tuple[int, ...], draw) -> np.ndarray:
    """float32 values of `shape` from `draw(n)` (n float64 values, in the generator's order),
    drawn DRAW_CHUNK at a time: the same stream as one draw of the whole (numpy's generators
    draw each value in turn), without VGG-19's 103-million-value weight as two float64 arrays
    at once (1.6 GB)."""
    size = int(np.prod(shape, dtype=np.int64))
    out = np.empty(size, np.float32)
    for start in range(0, size, DRAW_CHUNK):
        out[start:start + DRAW_CHUNK] = draw(min(DRAW_CHUNK, size - start))
    return out.reshape(shape)


def _feeds_batchnorm(node, uses) -> bool:
    return any(op == "BatchNormalization" for op, _, _ in uses.get(node.output[0], ()))


def _write_checked(path: Path, model) -> None:
    """`model` written to `path` and checked there by onnx's checker (the file, not a second
    serialized copy in memory); a model that fails the check is not left in the cache."""
    import onnx
    data = model.SerializeToString()
    model.Clear()                        # (the caller's last use: its weights go now)
    _atomic_write(path, data)
    del data
    try:
        onnx.checker.check_model(str(path))
    except Exception:
        path.unlink(missing_ok=True)
        raise


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
