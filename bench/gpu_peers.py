"""Ours against PyTorch on the GPU machine (issue 11's table), in one run:

  ResNet-50 (torchvision, seeded random weights) b1 and b32, and the seed's TCN (8 temporal
  blocks of 25 channels, kernel 7, dilations 1..128, causal Conv1d + chomp, residual, Linear on
  the last step, log_softmax; input Nx1x784) b1 and b64: each exported to ONNX with
  torch.onnx.export, our outputs checked against torch's, then timed: ours (host arrays in and
  out: the upload and download are inside our time), torch eager and torch with a CUDA graph
  (fp32: TF32 off; cudnn.benchmark on), with the input already on the device;
  ViT-B/16 (torchvision) and a BERT-base-shaped encoder (sequence 128, padding mask) b1 and
  b32, exported at opset 17 (torch only);
  the ReLU example layer on 1x64x1024x1024 against a float4 copy kernel (bandwidth).

The TCN rows run Network's default (on a GPU the runs of temporal blocks that are launch-bound
there fused: batch 1 on an H100, not 64). With --temporal-blocks each TCN case runs again
unfused and fused (Network(fuse_temporal_blocks=False / True)): rows 'TCN b1 unfused' and
'TCN b1 fused' under 'TCN b1', the same model, inputs and torch times, the tiles the tuner kept
in the notes.

Ratios come from this one run. Without torch (or CUDA) the torch columns say why they are
empty, and the models are made without it (the light ResNet-50 of the onnx package, the TCN
written with onnx.helper), so `--device CPU --quick` smoke-tests the whole script on PoCL.

    python bench/gpu_peers.py --device GPU [--runs 50] [--tuning fast] [--temporal-blocks]
    python bench/gpu_peers.py --device CPU --quick [--only TCN --temporal-blocks]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

TCN_CHANNELS, TCN_LEVELS, TCN_KERNEL, TCN_LENGTH, TCN_CLASSES = 25, 8, 7, 784, 10
# a TCN row's name after its batch, by fuse_temporal_blocks (None: Network's default)
TCN_FORMS = {None: "", False: " unfused", True: " fused"}


def median_ms(fn, runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


# -- torch ---------------------------------------------------------------------------------
def torch_or_reason():
    try:
        import torch
    except Exception as e:                       # noqa: BLE001 - any import failure
        return None, f"torch is not installed ({type(e).__name__})"
    if not torch.cuda.is_available():
        return None, "torch has no CUDA device"
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return torch, ""


def torch_tcn(torch):
    nn = torch.nn
    from torch.nn.utils.parametrizations import weight_norm

    class Chomp1d(nn.Module):
        def __init__(self, size):
            super().__init__()
            self.size = size

        def forward(self, x):
            return x[:, :, :-self.size].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, cin, cout, k, dilation, dropout=0.2):
            super().__init__()
            pad = (k - 1) * dilation
            self.conv1 = weight_norm(nn.Conv1d(cin, cout, k, padding=pad, dilation=dilation))
            self.conv2 = weight_norm(nn.Conv1d(cout, cout, k, padding=pad, dilation=dilation))
            self.net = nn.Sequential(self.conv1, Chomp1d(pad), nn.ReLU(), nn.Dropout(dropout),
                                     self.conv2, Chomp1d(pad), nn.ReLU(), nn.Dropout(dropout))
            self.downsample = nn.Conv1d(cin, cout, 1) if cin != cout else None
            self.relu = nn.ReLU()

        def forward(self, x):
            res = x if self.downsample is None else self.downsample(x)
            return self.relu(self.net(x) + res)

    class TCN(nn.Module):
        def __init__(self):
            super().__init__()
            blocks = [TemporalBlock(1 if i == 0 else TCN_CHANNELS, TCN_CHANNELS, TCN_KERNEL, 2 ** i)
                      for i in range(TCN_LEVELS)]
            self.tcn = nn.Sequential(*blocks)
            self.linear = nn.Linear(TCN_CHANNELS, TCN_CLASSES)

        def forward(self, x):
            y = self.tcn(x)
            return torch.nn.functional.log_softmax(self.linear(y[:, :, -1]), dim=1)

    model = TCN().eval()
    # deployed weights: the weight norm folded into plain weights (torch and ours alike)
    from torch.nn.utils import parametrize
    for block in model.tcn:
        for conv in (block.conv1, block.conv2):
            parametrize.remove_parametrizations(conv, "weight")
    return model


def export(torch, model, xs: list, names: list, path: Path, opset: int = 13) -> Path:
    args = tuple(torch.from_numpy(x) for x in xs)
    # the TorchScript exporter cannot export attention's fused fast path; torch is timed with it
    torch.backends.mha.set_fastpath_enabled(False)
    kwargs = dict(input_names=names, output_names=["y"], opset_version=opset)
    try:
        torch.onnx.export(model, args, str(path), dynamo=False, **kwargs)
    except TypeError:                     # an older torch without the dynamo switch
        torch.onnx.export(model, args, str(path), **kwargs)
    return path


def vit_with_a_head(torch, torchvision):
    """torchvision's ViT-B/16 with its classifier drawn at random (it starts at zero)."""
    model = torchvision.models.vit_b_16(weights=None)
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    return model


def torch_bert(torch):
    """A BERT-base-shaped encoder: embeddings, 12 post-norm layers 768 wide, 12 heads, GELU,
    the padding mask from the attention mask (bench/architectures.py's, shared)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("architectures", ROOT / "bench" /
                                                  "architectures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.torch_models(torch)["bert_base_128"][0]


def case_inputs(model_name: str, batch: int) -> tuple[list, list]:
    """(arrays, names) of one case's inputs."""
    rng = np.random.default_rng(batch)
    if model_name == "BERT-base":
        ids = rng.integers(1, 30522, (batch, 128)).astype(np.int64)
        mask = np.ones((batch, 128), np.int64)
        mask[batch // 2:, 100:] = 0
        return [ids, mask], ["ids", "mask"]
    shape = {"TCN": (batch, 1, TCN_LENGTH)}.get(model_name, (batch, 3, 224, 224))
    return [rng.standard_normal(shape).astype(np.float32)], ["x"]


def torch_runners(torch, model, xs: list):
    """(eager, cuda_graph, output): callables that run once and synchronize."""
    model = model.cuda().eval()
    xd = [torch.from_numpy(x).cuda() for x in xs]

    def eager():
        with torch.no_grad():
            model(*xd)
        torch.cuda.synchronize()
    with torch.no_grad():
        out = model(*xd).cpu().numpy()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(*xd)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(*xd)

    def replay():
        graph.replay()
        torch.cuda.synchronize()
    return eager, replay, out


# -- models without torch -------------------------------------------------------------------
def onnx_tcn(path: Path, batch: int, levels: int = TCN_LEVELS, length: int = TCN_LENGTH,
             weight_norm: bool = False) -> Path:
    """The same TCN written with onnx.helper (random weights), for a run without torch.
    `levels` and `length` make it smaller (the streaming tests); `weight_norm` writes each
    convolution's weights as torch's export of weight norm does: g * v / ||v||, constant
    arithmetic (ReduceL2, Div, Mul) on initializers."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    init, nodes = [], []
    i64 = lambda v, n: init.append(numpy_helper.from_array(np.array(v, np.int64), n)) or n  # noqa
    f32 = lambda a, n: init.append(numpy_helper.from_array(a.astype(np.float32), n)) or n  # noqa
    x, cin = "x", 1

    def weights(w, name):
        if not weight_norm:
            return f32(w, name)
        norm = np.sqrt((w ** 2).sum(axis=(1, 2), keepdims=True))
        g = norm * (1 + 0.1 * rng.standard_normal(norm.shape))       # ||w|| near g
        nodes.append(helper.make_node("ReduceL2", [f32(w, name + "_v")], [name + "_n"],
                                      axes=[1, 2], keepdims=1))
        nodes.append(helper.make_node("Div", [f32(g, name + "_g"), name + "_n"], [name + "_s"]))
        nodes.append(helper.make_node("Mul", [name + "_v", name + "_s"], [name]))
        return name

    for level in range(levels):
        d = 2 ** level
        pad = (TCN_KERNEL - 1) * d
        h = x
        for j in (1, 2):
            c = f"b{level}c{j}"
            w = rng.standard_normal((TCN_CHANNELS, cin if j == 1 else TCN_CHANNELS, TCN_KERNEL))
            nodes.append(helper.make_node(
                "Conv", [h, weights(w * 0.3 / np.sqrt(w[0].size), c + "w"),
                         f32(rng.standard_normal(TCN_CHANNELS) * 0.1, c + "b")], [c],
                pads=[pad, pad], dilations=[d], kernel_shape=[TCN_KERNEL]))
            nodes.append(helper.make_node("Slice", [c, i64([0], c + "s0"), i64([-pad], c + "s1"),
                                                    i64([2], c + "ax")], [c + "sl"]))
            nodes.append(helper.make_node("Relu", [c + "sl"], [c + "r"]))
            h = c + "r"
        res = x
        if cin != TCN_CHANNELS:
            w = rng.standard_normal((TCN_CHANNELS, cin, 1))
            nodes.append(helper.make_node("Conv", [x, f32(w, f"b{level}dw"),
                                                   f32(np.zeros(TCN_CHANNELS), f"b{level}db")],
                                          [f"b{level}d"], kernel_shape=[1]))
            res = f"b{level}d"
        nodes.append(helper.make_node("Add", [h, res], [f"b{level}a"]))
        nodes.append(helper.make_node("Relu", [f"b{level}a"], [f"b{level}o"]))
        x, cin = f"b{level}o", TCN_CHANNELS
    nodes.append(helper.make_node("Gather", [x, i64(length - 1, "last")], ["lastv"], axis=2))
    nodes.append(helper.make_node("Gemm", ["lastv", f32(rng.standard_normal(
        (TCN_CLASSES, TCN_CHANNELS)) * 0.2, "fcw"), f32(np.zeros(TCN_CLASSES), "fcb")], ["fc"],
        transB=1))
    nodes.append(helper.make_node("LogSoftmax", ["fc"], ["y"], axis=1))
    graph = helper.make_graph(
        nodes, "tcn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [batch, 1, length])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, TCN_CLASSES])], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8          # what every onnxruntime of opset 13 reads (the GPU machine's)
    onnx.save(model, path)
    return path


def light_resnet50(workdir: Path, batch: int) -> tuple[Path, dict]:
    import models as light
    from cold_start import resnet50_onnx
    path = resnet50_onnx(workdir)
    from customlayers.graph.load import read_model
    inp = read_model(path).parameters[0]
    return path, {inp.name: (batch,) + tuple(inp.outputs[0].shape[1:])}


# -- ours ----------------------------------------------------------------------------------
def ours(engine, path: Path, shapes: dict | None, xs: list, runs: int, tuning: str,
         fuse_temporal_blocks: bool | None = None):
    """(host ms, device-tensor ms, device ms of the kernels, launches, output, tuning note).
    host: numpy in and out; device-tensor: the input and the output are device buffers set on
    the request (set_tensor), as torch's are tensors on the GPU, so the time is the inference's
    alone, from the first enqueue to the last kernel's end. The note names the tiles of the
    TemporalBlocks layers where the temporal blocks are fused."""
    import pyopencl as cl
    from customlayers.runtime.observe import profile
    from customlayers.runtime.compile.network import Network
    options = dict(input_shapes=shapes, tuning=tuning, fuse_temporal_blocks=fuse_temporal_blocks)
    net = Network(path, engine=engine, **options)
    feeds = dict(zip(net.input_names, xs))
    req = net.create_request()
    outputs = req.infer(feeds)
    out = list(outputs.values())[0]
    host = median_ms(lambda: req.infer(feeds), runs)
    mf = cl.mem_flags
    on_device = net.create_request()
    for name, x in feeds.items():
        on_device.set_tensor(name, cl.Buffer(engine.context, mf.READ_WRITE | mf.COPY_HOST_PTR,
                                             hostbuf=np.ascontiguousarray(x)))
    for out_name, value in outputs.items():
        on_device.set_tensor(out_name, cl.Buffer(engine.context, mf.READ_WRITE, value.nbytes))

    def run_on_device():
        on_device.start_async()
        on_device.wait()
    device = median_ms(run_on_device, runs)
    timed = Network(path, engine=engine, profiling=True, **options)
    treq = timed.create_request()
    kernel_runs = []
    for _ in range(max(3, runs // 5)):
        treq.infer(feeds)
        kernel_runs.append(sum(r.ns for r in profile.collect(treq)) / 1e6)
    note = next((m for m in net.messages if m.startswith("tuning")), "")
    tiles = [f"{launch.global_size[0] // launch.local_size[0]}x{launch.local_size[0]} "
             f"{launch.label.removeprefix('temporal_blocks_')}"
             for step in net.plan.steps if step.type == "TemporalBlocks"
             for launch in step.launches]
    if tiles:
        note = "; ".join(filter(None, [note, f"TemporalBlocks work-groups x items: "
                                             f"{', '.join(tiles)}"]))
    return host, device, statistics.median(kernel_runs), len(treq.events), out, note


# -- the memory-bound layer ----------------------------------------------------------------
COPY4 = """__kernel void copy4(__global const float4* restrict a, __global float4* restrict b)
{ const size_t i = get_global_id(0); b[i] = a[i]; }"""


def relu_against_copy(engine, shape, runs: int) -> tuple[float, float]:
    """(ReLU example GB/s, float4 copy GB/s), read + write, best of `runs` profiled launches."""
    import pyopencl as cl
    from customlayers.jit.tensor import TensorDesc
    from customlayers.runtime.layers.registry import Registry
    reg = Registry(engine)
    reg.load(ROOT / "examples" / "layers" / "relu" / "relu.xml")
    bound = reg.bind("ReLU", [TensorDesc(shape)], params={"negative_slope": "0.1"})
    count = int(np.prod(shape))
    mf = cl.mem_flags
    src = cl.Buffer(engine.context, mf.READ_WRITE | mf.COPY_HOST_PTR,
                    hostbuf=np.random.default_rng(0).standard_normal(count).astype(np.float32))
    dst = cl.Buffer(engine.context, mf.READ_WRITE, count * 4)
    relu = bound.kernel
    relu.set_args(src, dst)
    copy = cl.Kernel(engine.build(COPY4), "copy4")
    copy.set_args(src, dst)
    q = engine.queue                                   # a profiling queue

    def best(kernel, gsize, lsize):
        times = []
        for _ in range(runs + 3):
            e = cl.enqueue_nd_range_kernel(q, kernel, gsize, lsize)
            e.wait()
            times.append((e.profile.end - e.profile.start) * 1e-9)
        return 2 * count * 4 / min(times[3:]) / 1e9
    return (best(relu, bound.global_size, bound.local_size),
            best(copy, (count // 4,), None))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--runs", type=int, default=None, help="timed runs each (default 50, "
                                                           "--quick 3)")
    ap.add_argument("--tuning", choices=("off", "fast", "full"), default="fast")
    ap.add_argument("--only", default="", help="run only the models whose name holds this")
    ap.add_argument("--temporal-blocks", action="store_true",
                    help="each TCN case also unfused and fused ('unfused' and 'fused' rows)")
    ap.add_argument("--quick", action="store_true",
                    help="small batches and a small ReLU tensor (a smoke test on a CPU device)")
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 50)
    from customlayers.runtime.device.device import Engine
    engine = Engine(args.device)
    torch, why = torch_or_reason()
    print(f"device: {engine.device.name.strip()} ({engine.device.platform.name.strip()}); "
          f"median of {runs} runs; tuning {args.tuning}")
    if torch is None:
        print(f"torch columns empty: {why}; models made without torch")
    # quick: ResNet-50 b1 only (the light model without torch declares batch 1)
    cases = [("ResNet-50", b) for b in ((1,) if args.quick else (1, 32))] + \
            [("TCN", b) for b in ((1, 4) if args.quick else (1, 64))]
    if torch is not None and not args.quick:     # the transformers come from torch only
        cases += [(m, b) for m in ("ViT-B/16", "BERT-base") for b in (1, 32)]
    cases = [c for c in cases if args.only in c[0]]
    head = (f"{'model':<16} {'ours ms':>8} {'dev-t ms':>8} {'kernels':>8} {'launches':>8} "
            f"{'eager ms':>9} {'graph ms':>9} {'ours/best':>9} {'dev/best':>9} {'max err':>9}")
    print(head)
    print("-" * len(head))
    notes = []
    with tempfile.TemporaryDirectory(prefix="gpu-peers-") as tmp:
        tmp = Path(tmp)
        for model_name, batch in cases:
            t0 = time.perf_counter()
            xs, names = case_inputs(model_name, batch)
            eager = graph = want = None
            if torch is not None:
                torch.manual_seed(0)
                import torchvision
                model = {"ResNet-50": lambda: torchvision.models.resnet50(weights=None),
                         "ViT-B/16": lambda: vit_with_a_head(torch, torchvision),
                         "BERT-base": lambda: torch_bert(torch),
                         "TCN": lambda: torch_tcn(torch)}[model_name]().eval()
                opset = 17 if model_name in ("ViT-B/16", "BERT-base") else 13
                path = export(torch, model, xs, names,
                              tmp / f"{model_name.replace('/', '')}{batch}.onnx", opset)
                shapes = None
                torch.backends.mha.set_fastpath_enabled(True)
                run_eager, run_graph, want = torch_runners(torch, model, xs)
                eager, graph = median_ms(run_eager, runs), median_ms(run_graph, runs)
            elif model_name == "ResNet-50":
                path, shapes = light_resnet50(tmp, batch)
            else:
                path, shapes = onnx_tcn(tmp / f"tcn{batch}.onnx", batch), None
            best = min(t for t in (eager, graph) if t is not None) if torch is not None else None
            # the default (None: on a GPU the launch-bound runs fused), then both forms asked for
            fused = (None, False, True) if args.temporal_blocks and model_name == "TCN" \
                else (None,)
            for fuse in fused:
                row = f"{model_name} b{batch}{TCN_FORMS[fuse]}"
                host, device, kernels, launches, out, note = ours(
                    engine, path, shapes, xs, runs, args.tuning, fuse_temporal_blocks=fuse)
                err = float(np.max(np.abs(out - want)) / max(np.max(np.abs(want)), 1e-30)) \
                    if want is not None else None
                if want is None and len(fused) > 1:   # without torch: against the default row
                    want = out
                fmt = lambda v, p=2: "-" if v is None else f"{v:.{p}f}"   # noqa: E731
                print(f"{row:<16} {host:>8.2f} {device:>8.2f} {kernels:>8.2f} "
                      f"{launches:>8} {fmt(eager):>9} {fmt(graph):>9} "
                      f"{fmt(host / best if best else None):>9} "
                      f"{fmt(device / best if best else None):>9} "
                      f"{'-' if err is None else f'{err:.1e}':>9}", flush=True)
                took = f"{time.perf_counter() - t0:.0f} s since the case began"
                notes.append(f"{row}: {'; '.join(filter(None, [note, took]))}")
        shape = (1, 8, 256, 256) if args.quick else (1, 64, 1024, 1024)
        relu_bw, copy_bw = relu_against_copy(engine, shape, runs)
        print(f"\nReLU example on {'x'.join(map(str, shape))}: {relu_bw:.0f} GB/s, float4 copy "
              f"{copy_bw:.0f} GB/s: ratio {relu_bw / copy_bw:.2f} (goal >= 0.9)")
    print("\nours: host arrays in and out (upload and download inside the time); dev-t: the "
          "input and output as device buffers set on the request, as torch's input and output "
          "are tensors on the GPU; kernels: the sum of our kernels' device times; torch: input "
          "already on the device; ours/best and dev/best: over the faster of eager and CUDA "
          "graph; max err: max |ours - torch| / max |torch| (without torch, a fused row's against "
          "its unfused row)")
    for n in notes:
        print("  " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
