"""The architectures of issue 20, exported from torch and run here against ONNX Runtime:

  ViT-B/16, Swin-T, ConvNeXt-T, ShuffleNetV2 (torchvision, random weights), a BERT-base-shaped
  encoder (12 layers, 768 wide, 12 heads, padding mask; sequence 128, and a dynamic sequence run
  at 128 and 77), a GPT-2-small-shaped decoder block (causal mask), a 2-layer LSTM, a
  bidirectional GRU and a YOLO-style head (SiLU, SPPF, FPN upsampling, grid decode),

each exported with the TorchScript exporter at opset 17 and with the dynamo exporter at opset 18
(where onnxscript is installed), and each file run by ONNX Runtime (CPU) and by us on the chosen
OpenCL device. A row is `match` (max |ours - ORT| / max |ORT| <= 1e-4), `WRONG` (a larger
difference), or `refused` with the first line of our message. Needs torch and torchvision
(the GPU machine has them); tests/device/test_onnx_transformer_models.py checks smaller
versions written with onnx.helper in CI.

    python bench/architectures.py [--device GPU] [--only NAME] [--exporters 17,18]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REL = 1e-4


def torch_models(torch):
    """name -> (module, example inputs as numpy, dynamic axes or None, input names)."""
    import torchvision
    nn = torch.nn
    rng = np.random.default_rng(0)
    image = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)

    class Bert(nn.Module):
        def __init__(self, vocab=30522, dim=768, heads=12, layers=12, ffn=3072, max_len=512):
            super().__init__()
            self.words, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
            self.norm = nn.LayerNorm(dim)
            layer = nn.TransformerEncoderLayer(dim, heads, ffn, dropout=0.0, activation="gelu",
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

        def forward(self, ids, mask):
            positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            x = self.norm(self.words(ids) + self.pos(positions))
            return self.encoder(x, src_key_padding_mask=mask == 0)

    class Gpt2Block(nn.Module):
        def __init__(self, dim=768, heads=12, max_len=1024):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.register_buffer("bias", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
                                 .view(1, 1, max_len, max_len))

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2)
                       for t in (q, k, v))
            w = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
            w = torch.where(self.bias[:, :, :s, :s], w, torch.finfo(w.dtype).min)
            a = (w.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
            x = x + self.proj(a)
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Recurrent(nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.rnn = (nn.LSTM(64, 128, num_layers=2, batch_first=True) if kind == "lstm"
                        else nn.GRU(64, 128, bidirectional=True, batch_first=True))

        def forward(self, x):
            return self.rnn(x)[0]

    class YoloHead(nn.Module):
        def __init__(self, c=32, anchors=3, classes=4):
            super().__init__()
            conv = lambda i, o, k=1, s=1: nn.Sequential(nn.Conv2d(i, o, k, s, k // 2),  # noqa
                                                         nn.SiLU())
            self.stem, self.down = conv(3, c, 3, 2), conv(c, 2 * c, 3, 2)
            self.reduce, self.pool = conv(2 * c, c), nn.MaxPool2d(5, 1, 2)
            self.sppf = conv(4 * c, 2 * c)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = conv(3 * c, c)
            self.detect = nn.Conv2d(c, anchors * (5 + classes), 1)
            self.anchors, self.outputs = anchors, 5 + classes

        def forward(self, x):
            p3 = self.stem(x)
            p4 = self.down(p3)
            y = self.reduce(p4)
            y1 = self.pool(y)
            y2 = self.pool(y1)
            p4 = self.sppf(torch.cat([y, y1, y2, self.pool(y2)], 1))
            f = self.fuse(torch.cat([self.up(p4), p3], 1))
            d = self.detect(f)
            b, _, h, w = d.shape
            d = d.view(b, self.anchors, self.outputs, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).float()
            xy = (d[..., :2] * 2 - 0.5 + grid) * 2.0
            wh = (d[..., 2:4] * 2) ** 2 * 8.0
            return torch.cat((xy, wh, d[..., 4:]), -1).view(b, -1, self.outputs)

    vit = torchvision.models.vit_b_16(weights=None)
    # torchvision starts the classifier at zero (every output 0 would match anything)
    nn.init.normal_(vit.heads.head.weight, std=0.02)
    ids = rng.integers(1, 30522, (2, 128)).astype(np.int64)
    mask = np.ones((2, 128), np.int64)
    mask[1, 100:] = 0
    seq = rng.standard_normal((2, 50, 64)).astype(np.float32)
    return {
        "vit_b_16": (vit, [image], None, ["x"]),
        "swin_t": (torchvision.models.swin_t(weights=None), [image], None, ["x"]),
        "convnext_tiny": (torchvision.models.convnext_tiny(weights=None), [image], None, ["x"]),
        "shufflenet_v2": (torchvision.models.shufflenet_v2_x1_0(weights=None), [image], None,
                          ["x"]),
        "bert_base_128": (Bert(), [ids, mask], None, ["ids", "mask"]),
        "bert_base_dynamic": (Bert(), [ids, mask], {"ids": {0: "batch", 1: "seq"},
                                                    "mask": {0: "batch", 1: "seq"}},
                              ["ids", "mask"]),
        "gpt2_block": (Gpt2Block(), [rng.standard_normal((1, 64, 768)).astype(np.float32)],
                       None, ["x"]),
        "lstm_2_layers": (Recurrent("lstm"), [seq], None, ["x"]),
        "gru_bidirectional": (Recurrent("gru"), [seq], None, ["x"]),
        "yolo_head": (YoloHead(), [rng.standard_normal((1, 3, 128, 128)).astype(np.float32)],
                      None, ["x"]),
    }


def export(torch, module, inputs, names, dynamic, opset: int, path: Path) -> str:
    """'' when exported, else why not."""
    args = tuple(torch.from_numpy(a) for a in inputs)
    # eval-mode attention takes torch's fused fast path, which the TorchScript exporter cannot
    # export (aten::_native_multi_head_attention): the plain ops are what deployments export
    torch.backends.mha.set_fastpath_enabled(False)
    kwargs = dict(input_names=names, output_names=["y"], opset_version=opset)
    try:
        if opset >= 18:                      # the dynamo exporter (needs onnxscript)
            import onnxscript  # noqa: F401
            shapes = None
            if dynamic:                      # one Dim per symbol, shared by the inputs
                dims: dict = {}
                dim = lambda d: dims.setdefault(d, torch.export.Dim(  # noqa: E731
                    d, min=2, max=512 if d == "seq" else 64))
                shapes = {p: {a: dim(d) for a, d in dynamic[n].items()}
                          for p, n in zip(_parameter_names(module), names)}
            torch.onnx.export(module, args, str(path), dynamo=True, dynamic_shapes=shapes,
                              **kwargs)
        else:
            torch.onnx.export(module, args, str(path), dynamo=False, dynamic_axes=dynamic,
                              **kwargs)
    except Exception as e:                    # noqa: BLE001 - the exporter's own failure
        return f"export failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return ""


def _parameter_names(module) -> list[str]:
    import inspect
    return [p for p in inspect.signature(module.forward).parameters]


def run_ours(engine, path: Path, feeds: dict, more: list[dict]) -> tuple[list, float, float]:
    from customlayers.graph.onnx.reader import read_onnx
    from customlayers.runtime.compile.network import Network
    t = time.perf_counter()
    net = Network(read_onnx(path), engine=engine)
    first = list(net.infer(feeds).values())
    load = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(3):
        net.infer(feeds)
    infer = (time.perf_counter() - t) / 3
    return [first] + [list(net.infer(f).values()) for f in more], load, infer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--only", default="")
    ap.add_argument("--exporters", default="17,18", help="opsets: 17 TorchScript, 18 dynamo")
    args = ap.parse_args()
    try:
        import torch
        import onnxruntime as ort
    except ImportError as e:
        print(f"needs torch, torchvision and onnxruntime: {e}")
        return 2
    from customlayers.errors import CustomLayersError
    from customlayers.runtime.device.device import Engine
    engine = Engine(args.device)
    print(f"device: {engine.device.name.strip()}; torch {torch.__version__}")
    torch.manual_seed(0)
    models = torch_models(torch)
    rows = []
    with tempfile.TemporaryDirectory(prefix="architectures-") as tmp:
        for name, (module, inputs, dynamic, names) in models.items():
            if args.only not in name:
                continue
            module.eval()
            for opset in (int(o) for o in args.exporters.split(",")):
                path = Path(tmp) / f"{name}_{opset}.onnx"
                with torch.no_grad():
                    why = export(torch, module, inputs, names, dynamic, opset, path)
                label = f"{name} opset {opset} ({'dynamo' if opset >= 18 else 'torchscript'})"
                if why:
                    rows.append((label, why))
                    print(f"{label:<48} {why}", flush=True)
                    continue
                session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
                in_names = [i.name for i in session.get_inputs()]
                feeds = dict(zip(in_names, inputs))
                more, note = [], ""
                if dynamic:                      # a second, shorter sequence
                    more = [{n: a[:, :77] for n, a in feeds.items()}]
                    try:
                        session.run(None, more[0])
                    except Exception:            # noqa: BLE001 - ONNX Runtime's own failure
                        # the exporter baked the traced length into a Reshape (TorchScript
                        # tracing nn.MultiheadAttention): the file is not dynamic at all
                        more, note = [], "; the file fails at another length in ONNX Runtime " \
                                         "too (the exporter baked the traced one in)"
                try:
                    got, load, infer = run_ours(engine, path, feeds, more)
                except CustomLayersError as e:
                    status = f"refused: {str(e).splitlines()[0][:200]}"
                else:
                    errs = []
                    for f, ours in zip([feeds] + more, got):
                        want = session.run(None, f)
                        errs += [float(np.abs(o - w).max() / max(np.abs(w).max(), 1e-30))
                                 for o, w in zip(ours, want)]
                    err = max(errs)
                    status = (f"{'match' if err <= REL else 'WRONG'} rel err {err:.1e}; "
                              f"load+first {load:.1f} s, infer {infer * 1e3:.1f} ms{note}")
                rows.append((label, status))
                print(f"{label:<48} {status}", flush=True)
    wrong = sum(1 for _, s in rows if s.startswith("WRONG"))
    print(f"\n{sum(1 for _, s in rows if s.startswith('match'))} of {len(rows)} match, "
          f"{wrong} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
