"""Transformer models written with onnx.helper in the op patterns torch.onnx.export emits at
opset 17 (TorchScript exporter), so that CI checks whole architectures without torch:

    vit(...)          ViT: Conv patch embedding, a class token Expanded to the batch from Shape,
                      position embedding, pre-norm encoder blocks, LayerNormalization, the
                      exporter's erf GELU, the class token's row through a Gemm head
    bert(...)         a BERT encoder: Gather word embeddings, position embeddings Sliced to the
                      sequence length from Shape (dynamic), the padding mask as an additive bias
                      from the int64 attention_mask (Unsqueeze, Cast, Sub, Mul), post-norm blocks
    gpt2_block(...)   a GPT-2 decoder block: fused qkv projection Split three ways, a causal mask
                      Sliced from a constant lower triangle and applied with Where, tanh GELU

Each returns (onnx.ModelProto, {input name: numpy array}) with seeded weights scaled so that
activations stay O(1). bench/architectures.py runs the torch-exported originals where torch is.
"""
from __future__ import annotations

import numpy as np


class _Builder:
    """Nodes and initializers of one graph, with unique names."""

    def __init__(self, seed: int):
        from onnx import helper, numpy_helper
        self.helper, self.numpy_helper = helper, numpy_helper
        self.rng = np.random.default_rng(seed)
        self.nodes, self.init, self.count = [], [], 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, value, base: str = "c", dtype=np.float32) -> str:
        name = self.name(base)
        self.init.append(self.numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def ints(self, values, base: str = "i") -> str:
        return self.const(values, base, np.int64)

    def weight(self, shape, fan_in: int, base: str = "w") -> str:
        return self.const(self.rng.standard_normal(shape) / np.sqrt(fan_in), base)

    def op(self, op_type: str, inputs, outputs: int = 1, base: str | None = None, **attrs):
        names = [self.name(base or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    # -- the pieces the exporter emits -----------------------------------------------------
    def linear(self, x: str, din: int, dout: int) -> str:
        y = self.op("MatMul", [x, self.weight((din, dout), din)])
        return self.op("Add", [y, self.const(self.rng.standard_normal(dout) * 0.02, "b")])

    def layer_norm(self, x: str, d: int) -> str:
        scale = self.const(1 + 0.1 * self.rng.standard_normal(d), "ln_w")
        bias = self.const(0.02 * self.rng.standard_normal(d), "ln_b")
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-5)

    def gelu_erf(self, x: str) -> str:
        e = self.op("Erf", [self.op("Div", [x, self.const(np.sqrt(2.0))])])
        y = self.op("Mul", [x, self.op("Add", [e, self.const(1.0)])])
        return self.op("Mul", [y, self.const(0.5)])

    def gelu_tanh(self, x: str) -> str:
        cube = self.op("Pow", [x, self.const(3.0)])
        inner = self.op("Add", [x, self.op("Mul", [cube, self.const(0.044715)])])
        t = self.op("Tanh", [self.op("Mul", [inner, self.const(np.sqrt(2 / np.pi))])])
        y = self.op("Mul", [self.op("Mul", [x, self.const(0.5)]),
                            self.op("Add", [t, self.const(1.0)])])
        return y

    def dims(self, x: str, axes) -> list[str]:
        """Shape(x)[axis] as 1-element int64 tensors (the exporter's Shape/Gather/Unsqueeze)."""
        shape = self.op("Shape", [x])
        return [self.op("Unsqueeze", [self.op("Gather", [shape, self.ints(a)], axis=0),
                                      self.ints([0])]) for a in axes]

    def split_heads(self, x: str, heads: int, head: int) -> str:
        b, s = self.dims(x, (0, 1))
        shape = self.op("Concat", [b, s, self.ints([heads]), self.ints([head])], axis=0)
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    def merge_heads(self, x: str, d: int) -> str:
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        b, s = self.dims(t, (0, 1))
        return self.op("Reshape", [t, self.op("Concat", [b, s, self.ints([d])], axis=0)])

    def attention(self, q: str, k: str, v: str, d: int, heads: int, bias: str | None = None,
                  causal: tuple[str, int] | None = None) -> str:
        """Scaled dot-product attention of [B, S, d] projections: an additive `bias`
        broadcast to [B, H, S, S], or `causal` = (the mask input's name, max length): a
        Where over a lower triangle Sliced to the sequence, as GPT-2's export does."""
        head = d // heads
        qh, kh, vh = (self.split_heads(t, heads, head) for t in (q, k, v))
        kt = self.op("Transpose", [kh], perm=[0, 1, 3, 2])
        scores = self.op("Div", [self.op("MatMul", [qh, kt]), self.const(np.sqrt(head))])
        if bias is not None:
            scores = self.op("Add", [scores, bias])
        if causal is not None:
            tril, _ = causal
            (s,) = self.dims(q, (1,))
            mask = self.op("Slice", [tril, self.ints([0, 0]), self.op("Concat", [s, s], axis=0),
                                     self.ints([2, 3])])
            scores = self.op("Where", [mask, scores, self.const(np.finfo(np.float32).min)])
        probs = self.op("Softmax", [scores], axis=-1)
        return self.merge_heads(self.op("MatMul", [probs, vh]), d)

    def model(self, inputs, outputs, opset: int = 17):
        graph = self.helper.make_graph(self.nodes, "transformer", inputs, outputs, self.init)
        model = self.helper.make_model(graph, opset_imports=[self.helper.make_opsetid("", opset)])
        model.ir_version = 8
        return model


def vit(batch=2, image=32, patch=8, dim=64, heads=4, depth=2, mlp=128, classes=10, seed=0,
        batch_dim: int | str | None = None):
    """A ViT (torchvision's vit_b_16 pattern); `batch_dim` names the input's batch (a symbol
    makes the batch dynamic)."""
    from onnx import TensorProto, helper
    bld = _Builder(seed)
    tokens = (image // patch) ** 2
    conv = bld.op("Conv", ["x", bld.weight((dim, 3, patch, patch), 3 * patch * patch),
                           bld.const(np.zeros(dim))], kernel_shape=[patch, patch],
                  strides=[patch, patch])
    (b,) = bld.dims("x", (0,))
    flat = bld.op("Reshape", [conv, bld.op("Concat", [b, bld.ints([dim, tokens])], axis=0)])
    seq = bld.op("Transpose", [flat], perm=[0, 2, 1])
    cls = bld.op("Expand", [bld.const(0.02 * bld.rng.standard_normal((1, 1, dim)), "cls"),
                            bld.op("Concat", [b, bld.ints([1, dim])], axis=0)])
    x = bld.op("Concat", [cls, seq], axis=1)
    x = bld.op("Add", [x, bld.const(0.02 * bld.rng.standard_normal((1, tokens + 1, dim)), "pos")])
    for _ in range(depth):
        h = bld.layer_norm(x, dim)
        a = bld.attention(bld.linear(h, dim, dim), bld.linear(h, dim, dim),
                          bld.linear(h, dim, dim), dim, heads)
        x = bld.op("Add", [x, bld.linear(a, dim, dim)])
        h = bld.layer_norm(x, dim)
        x = bld.op("Add", [x, bld.linear(bld.gelu_erf(bld.linear(h, dim, mlp)), mlp, dim)])
    x = bld.layer_norm(x, dim)
    first = bld.op("Gather", [x, bld.ints(0)], axis=1)
    y = bld.op("Gemm", [first, bld.weight((classes, dim), dim), bld.const(np.zeros(classes))],
               base="y", transB=1)
    bdim = batch if batch_dim is None else batch_dim
    model = bld.model([helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [bdim, 3, image, image])],
                      [helper.make_tensor_value_info(y, TensorProto.FLOAT, [bdim, classes])])
    x_in = np.random.default_rng(seed + 1).standard_normal((batch, 3, image, image))
    return model, {"x": x_in.astype(np.float32)}


def bert(batch=2, seq: int = 16, vocab=100, dim=64, heads=4, layers=2, ffn=128, max_len=64,
         seed=0, dynamic: bool = False, pad_from: int | None = None):
    """A BERT encoder on input_ids and attention_mask [batch, seq] (int64); `dynamic` declares
    batch and sequence as symbols; `pad_from` masks the positions from there on."""
    from onnx import TensorProto, helper
    bld = _Builder(seed)
    words = bld.op("Gather", [bld.const(bld.rng.standard_normal((vocab, dim)), "wte"),
                              "input_ids"], axis=0)
    (s,) = bld.dims("input_ids", (1,))
    pos = bld.op("Slice", [bld.const(0.1 * bld.rng.standard_normal((max_len, dim)), "wpe"),
                           bld.ints([0]), s, bld.ints([0])])
    x = bld.layer_norm(bld.op("Add", [words, pos]), dim)
    # the padding mask: (1 - mask) * -10000 on [B, 1, 1, S]
    m = bld.op("Cast", [bld.op("Unsqueeze", ["attention_mask", bld.ints([1, 2])])],
               to=TensorProto.FLOAT)
    bias = bld.op("Mul", [bld.op("Sub", [bld.const(1.0), m]), bld.const(-10000.0)])
    for _ in range(layers):
        a = bld.attention(bld.linear(x, dim, dim), bld.linear(x, dim, dim),
                          bld.linear(x, dim, dim), dim, heads, bias=bias)
        x = bld.layer_norm(bld.op("Add", [x, bld.linear(a, dim, dim)]), dim)
        f = bld.linear(bld.gelu_erf(bld.linear(x, dim, ffn)), ffn, dim)
        x = bld.layer_norm(bld.op("Add", [x, f]), dim)
    y = bld.op("Identity", [x], base="last_hidden_state")
    dims = ["batch", "sequence"] if dynamic else [batch, seq]
    model = bld.model([helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims),
                       helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dims)],
                      [helper.make_tensor_value_info(y, TensorProto.FLOAT, dims + [dim])])
    return model, bert_inputs(batch, seq, vocab, seed + 1, pad_from)


def bert_inputs(batch: int, seq: int, vocab: int = 100, seed: int = 1,
                pad_from: int | None = None) -> dict:
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int64)
    if pad_from is not None:
        mask[1:, pad_from:] = 0                  # every row but the first is padded
    return {"input_ids": rng.integers(1, vocab, (batch, seq)).astype(np.int64),
            "attention_mask": mask}


def gpt2_block(batch=2, seq=12, dim=64, heads=4, max_len=32, seed=0, dynamic: bool = False):
    """One GPT-2 decoder block on x [batch, seq, dim] with its causal mask."""
    from onnx import TensorProto, helper
    bld = _Builder(seed)
    tril = bld.const(np.tril(np.ones((1, 1, max_len, max_len), bool)), "bias", np.bool_)
    h = bld.layer_norm("x", dim)
    qkv = bld.linear(h, dim, 3 * dim)
    q, k, v = bld.op("Split", [qkv, bld.ints([dim, dim, dim])], outputs=3, axis=2)
    a = bld.attention(q, k, v, dim, heads, causal=(tril, max_len))
    x = bld.op("Add", ["x", bld.linear(a, dim, dim)])
    h = bld.layer_norm(x, dim)
    y = bld.op("Add", [x, bld.linear(bld.gelu_tanh(bld.linear(h, dim, 4 * dim)), 4 * dim, dim)],
               base="y")
    dims = ["batch", "sequence", dim] if dynamic else [batch, seq, dim]
    model = bld.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                      [helper.make_tensor_value_info(y, TensorProto.FLOAT, dims)])
    x_in = np.random.default_rng(seed + 1).standard_normal((batch, seq, dim))
    return model, {"x": x_in.astype(np.float32)}


def torch_mha_encoder(batch=2, seq=6, dim=32, heads=4, layers=2, ffn=64, seed=0,
                      dynamo: bool = False, pad_from: int | None = None):
    """Post-norm encoder layers on x [batch, seq, dim] in the pattern torch.onnx.export writes
    for nn.TransformerEncoderLayer(batch_first=True) (nn.MultiheadAttention's fused projection):
    Transpose (1, 0, 2) to [S, B, D], one in_proj MatMul + bias, Reshape [S, B, 3, D], Unsqueeze,
    Transpose (3, 1, 2, 0, 4), Squeeze, a Gather per q/k/v, Reshape [S, B*H, d], Transpose
    (1, 0, 2), Reshape [B, H, S, d], q and k each Multiplied by the fourth root of 1/d (k
    Transposed (0, 2, 1) first with `dynamo`, as the dynamo exporter writes it), the additive
    padding mask (input mask_bias [B, 1, 1, S]) Expanded to the heads in every layer and Added,
    Softmax, the values, Transpose (2, 0, 1, 3), Reshape
    [S*B, D], the out_proj Gemm, Reshape [S, B, D], Transpose (1, 0, 2), the residual and
    LayerNormalization, then the feed-forward block. `pad_from` masks the later positions of
    every row but the first."""
    from onnx import TensorProto, helper
    bld = _Builder(seed)
    s, b, d, h = seq, batch, dim, heads
    hd = d // h
    x = "x"
    mask = np.zeros((b, 1, 1, s), np.float32)
    if pad_from is not None:
        mask[1:, :, :, pad_from:] = -1e4
    scale = bld.const(np.float32((1.0 / hd) ** 0.25))
    for _ in range(layers):
        t = bld.op("Transpose", [x], perm=[1, 0, 2])
        qkv = bld.op("Add", [bld.const(bld.rng.standard_normal(3 * d) * 0.02, "b"),
                             bld.op("MatMul", [t, bld.weight((d, 3 * d), d)])])
        u = bld.op("Unsqueeze", [bld.op("Reshape", [qkv, bld.ints([s, b, 3, d])]),
                                 bld.ints([0])])
        sq = bld.op("Squeeze", [bld.op("Transpose", [u], perm=[3, 1, 2, 0, 4]), bld.ints([3])])
        heads_of = []
        for which in range(3):
            g = bld.op("Gather", [sq, bld.ints(which)], axis=0)
            heads_of.append(bld.op("Transpose", [bld.op("Reshape", [g, bld.ints([s, b * h, hd])])],
                                   perm=[1, 0, 2]))
        qh, kh, vh = heads_of
        q = bld.op("Mul", [bld.op("Reshape", [qh, bld.ints([b, h, s, hd])]), scale])
        if dynamo:
            kt = bld.op("Reshape", [bld.op("Transpose", [kh], perm=[0, 2, 1]),
                                    bld.ints([b, h, hd, s])])
        else:
            kt = bld.op("Transpose", [bld.op("Reshape", [kh, bld.ints([b, h, s, hd])])],
                        perm=[0, 1, 3, 2])
        scores = bld.op("MatMul", [q, bld.op("Mul", [kt, scale])])
        # every layer expands the mask input again (to [B, H, 1, S], as torch's layers do)
        expanded = bld.op("Expand", ["mask_bias", bld.ints([b, h, 1, s])])
        probs = bld.op("Softmax", [bld.op("Add", [scores, expanded])], axis=-1)
        ctx = bld.op("MatMul", [probs, bld.op("Reshape", [vh, bld.ints([b, h, s, hd])])])
        merged = bld.op("Reshape", [bld.op("Transpose", [ctx], perm=[2, 0, 1, 3]),
                                    bld.ints([s * b, d])])
        proj = bld.op("Gemm", [merged, bld.weight((d, d), d),
                               bld.const(bld.rng.standard_normal(d) * 0.02, "b")], transB=1)
        back = bld.op("Transpose", [bld.op("Reshape", [proj, bld.ints([s, b, d])])],
                      perm=[1, 0, 2])
        x = bld.layer_norm(bld.op("Add", [x, back]), d)
        f = bld.linear(bld.gelu_erf(bld.linear(x, d, ffn)), ffn, d)
        x = bld.layer_norm(bld.op("Add", [x, f]), d)
    y = bld.op("Identity", [x], base="y")
    model = bld.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, d]),
                       helper.make_tensor_value_info("mask_bias", TensorProto.FLOAT,
                                                     [b, 1, 1, s])],
                      [helper.make_tensor_value_info(y, TensorProto.FLOAT, [b, s, d])])
    x_in = np.random.default_rng(seed + 1).standard_normal((b, s, d)).astype(np.float32)
    return model, {"x": x_in, "mask_bias": mask}
