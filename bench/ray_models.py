"""The models bench/ray_scaling.py runs and the rows it feeds them: the model files (made on
first use for ResNet-50 with its batch left open, and a BERT-base-shaped encoder), their inputs
read without a device, random Ray batches for them, and the dataset of those batches."""
from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

LAYERS = ROOT / "examples" / "layers"
MODELS = {
    # 1x3x32x32 -> Conv, ReLU, GRN (custom), Conv, ReLU, ReorgYolo (custom), MaxPool, MatMul,
    # SoftMax: a fixed batch of 1, so rows run one by one with requests in flight
    "demo": (ROOT / "examples" / "models" / "demo_cnn.xml",
             [LAYERS / "grn" / "grn.xml", LAYERS / "reorg" / "reorg.xml",
              LAYERS / "relu" / "relu.xml"]),
    # Nx4x6x8 -> ReorgYolo (custom) -> Sigmoid: a dynamic batch
    "reorg": (ROOT / "examples" / "models" / "reorg_dynamic.onnx",
              [LAYERS / "reorg" / "reorg.xml"]),
    # ResNet-50 (the onnx package's light model, seeded random weights): made on first use
    "resnet50": (None, []),
    # a BERT-base-shaped encoder (tests/transformer_models.py: 12 layers 768 wide, 12 heads,
    # sequence 128, input_ids and attention_mask), random weights: made on first use
    "bert": (None, []),
}
BERT_SEQ, BERT_VOCAB = 128, 30522


def model_path(name: str, workdir: Path) -> Path:
    path, _ = MODELS[name]
    if path is not None:
        return path
    if name == "bert":
        import onnx
        from transformer_models import bert
        model, _ = bert(batch=1, seq=BERT_SEQ, vocab=BERT_VOCAB, dim=768, heads=12, layers=12,
                        ffn=3072, max_len=512, dynamic=True)
        out = workdir / "bert_base.onnx"
        onnx.save(model, str(out))
        return out
    import onnx
    from cold_start import resnet50_onnx
    from onnx import numpy_helper
    # its batch declared open (the light model declares 1 everywhere, and flattens to a
    # constant [1, 2048]), so that a package compiles it for the batch asked
    model = onnx.load(str(resnet50_onnx(workdir)))
    g = model.graph
    del g.value_info[:]
    inits = {t.name: t for t in g.initializer}
    for node in g.node:
        if node.op_type == "Reshape" and node.input[1] in inits:
            shape = numpy_helper.to_array(inits[node.input[1]]).copy()
            if shape[0] == 1:
                shape[0] = -1
                inits[node.input[1]].CopyFrom(numpy_helper.from_array(shape, node.input[1]))
    for info in [*g.input, *g.output]:
        info.type.tensor_type.shape.dim[0].dim_param = "N"
    out = workdir / "resnet50_open_batch.onnx"
    onnx.save(model, str(out))
    return out


def model_items(model: Path, configs, open_size: int) -> tuple[dict, int | None]:
    """({input name: one row's shape}, the declared batch): the inputs without their batch
    dimension, `open_size` for a dimension the model leaves open. Read without a device: the
    driver leaves the devices to the actors."""
    from customlayers.graph.load import read_model
    from customlayers.runtime.layers.registry import Registry
    registry = Registry()
    registry.load(*configs)
    params = read_model(str(model), custom_shapes=registry.output_shapes).parameters
    items = {}
    for p in params:
        dims = p.outputs[0].shape
        items[p.name] = tuple(open_size if d is None else d for d in dims[1:])
    return items, params[0].outputs[0].shape[0]


def make_block(rng, rows: int, items: dict) -> dict:
    """One Ray batch: {input name: rows x item}; token ids and an attention mask (the second
    half of the rows padded from position 100) for an encoder, normal floats otherwise."""
    block = {}
    for name, item in items.items():
        if name == "input_ids":
            block[name] = rng.integers(1, BERT_VOCAB, (rows, *item)).astype(np.int64)
        elif name == "attention_mask":
            mask = np.ones((rows, *item), np.int64)
            mask[rows // 2:, 100:] = 0
            block[name] = mask
        else:
            block[name] = rng.standard_normal((rows, *item), dtype=np.float32)
    return block


def block_dataset(ray, blocks: list[dict]):
    """A dataset of these blocks, one Arrow block each, a tensor column per input (as
    from_numpy stores one array)."""
    import pyarrow as pa
    from ray.data.extensions import ArrowTensorArray
    return ray.data.from_arrow([pa.table({n: ArrowTensorArray.from_numpy(a)
                                          for n, a in b.items()}) for b in blocks]).materialize()
