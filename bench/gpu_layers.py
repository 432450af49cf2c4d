"""Where the GPU time goes, layer by layer, next to cuDNN on the same convolution (issue 11).

For ResNet-50 (torchvision, exported to ONNX as bench/gpu_peers.py does) and the TCN, each of
our launches is profiled (OpenCL events, the median of several runs), grouped by layer, and
printed slowest first with the kernel variant the tuner chose and its GFLOP/s. Every 2-D
convolution is also timed in torch (cudnn.benchmark on, TF32 off, CUDA events) with the same
shapes, so the table says which layers lag cuDNN and by how much.

    python bench/gpu_layers.py --device GPU [--model resnet50 --batch 32] [--top 30]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_peers import (TCN_LENGTH, export, onnx_tcn, torch_or_reason,  # noqa: E402
                       torch_tcn)


def our_layers(engine, path: Path, x: np.ndarray, runs: int, tuning: str):
    """[(name, type, variant labels, median µs, input shapes, output shape)], in run order."""
    from customlayers.runtime.compile.network import Network
    net = Network(path, engine=engine, tuning=tuning, profiling=True)
    name = net.input_names[0]
    req = net.create_request()
    req.infer({name: x})
    per_step: dict[int, list[float]] = defaultdict(list)
    steps = {}
    for _ in range(runs):
        req.infer({name: x})
        summed: dict[int, float] = defaultdict(float)
        for step, event in req.events:
            summed[id(step)] += (event.profile.end - event.profile.start) / 1e3
            steps[id(step)] = step
        for k, v in summed.items():
            per_step[k].append(v)
    rows = []
    for k, step in steps.items():
        labels = "+".join(sorted({launch.label for launch in step.launches}))
        rows.append((step.name, step.type, labels, statistics.median(per_step[k]),
                     [tuple(d.shape) for d in step.input_descs],
                     tuple(step.output_descs[0].shape) if step.output_descs else ()))
    return rows


def conv_flops(inputs, out) -> float:
    if len(inputs) < 2 or len(out) < 3:
        return 0.0
    w = inputs[1]
    return 2.0 * np.prod(out) * np.prod(w[1:])


def cudnn_us(torch, inputs, out, runs: int) -> float | None:
    """cuDNN's time for the 2-D convolution with these shapes (torchvision's padding rule)."""
    x, w = inputs[0], inputs[1]
    if len(x) != 4 or len(w) != 4:
        return None
    stride = -(-x[2] // out[2])
    pad = ((out[2] - 1) * stride + w[2] - x[2] + 1) // 2
    xd = torch.randn(*x, device="cuda")
    wd = torch.randn(*w, device="cuda")
    conv = lambda: torch.nn.functional.conv2d(xd, wd, stride=stride, padding=pad)  # noqa
    if tuple(conv().shape) != tuple(out):
        return None
    for _ in range(5):
        conv()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        conv()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--model", choices=("resnet50", "tcn"), default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--tuning", choices=("off", "fast", "full"), default="fast")
    args = ap.parse_args()
    from customlayers.runtime.device.device import Engine
    engine = Engine(args.device)
    torch, why = torch_or_reason()
    with tempfile.TemporaryDirectory(prefix="gpu-layers-") as tmp:
        tmp = Path(tmp)
        if args.model == "resnet50":
            shape = (args.batch, 3, 224, 224)
        else:
            shape = (args.batch, 1, TCN_LENGTH)
        if torch is not None:
            torch.manual_seed(0)
            if args.model == "resnet50":
                import torchvision
                model = torchvision.models.resnet50(weights=None).eval()
            else:
                model = torch_tcn(torch)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        if torch is not None:
            path = export(torch, model, [x], ["x"], tmp / "model.onnx")
        elif args.model == "tcn":
            path = onnx_tcn(tmp / "tcn.onnx", args.batch)
        else:
            print(f"no torch: {why}")
            return 1
        rows = our_layers(engine, path, x, args.runs, args.tuning)
    total = sum(r[3] for r in rows)
    by_label: dict[str, list] = defaultdict(lambda: [0.0, 0.0, 0])
    print(f"{args.model} b{args.batch}: {len(rows)} steps, kernels {total / 1e3:.3f} ms "
          f"(median per step of {args.runs} runs)")
    head = (f"{'layer':<28} {'type':<14} {'variant':<34} {'us':>8} {'cudnn':>8} {'x':>5} "
            f"{'TFLOP/s':>7}  shapes")
    print(head)
    peer_total = ours_conv = 0.0
    for name, typ, labels, us, ins, out in sorted(rows, key=lambda r: -r[3])[:args.top]:
        flops = conv_flops(ins, out) if "Conv" in typ else 0.0
        peer = cudnn_us(torch, ins, out, 20) if torch is not None and "Conv" in typ else None
        ratio = f"{us / peer:5.2f}" if peer else "    -"
        tf = f"{flops / us / 1e6:7.1f}" if flops else "      -"
        print(f"{name[-28:]:<28} {typ[:14]:<14} {labels[-34:]:<34} {us:8.1f} "
              f"{peer if peer else 0:8.1f} {ratio} {tf}  {ins[0]}->{out}")
    for name, typ, labels, us, ins, out in rows:
        kind = labels.split("_gemm")[0] if "_gemm" in labels else labels.split("+")[0][:24]
        entry = by_label[f"{typ}:{kind}"]
        entry[0] += us
        entry[2] += 1
        if "Conv" in typ and torch is not None:
            peer = cudnn_us(torch, ins, out, 10)
            if peer:
                entry[1] += peer
                peer_total += peer
                ours_conv += us
    print("\nby op and kernel family:")
    for key, (us, peer, n) in sorted(by_label.items(), key=lambda kv: -kv[1][0]):
        print(f"  {key:<48} {n:>4} layers {us:9.1f} us  cudnn {peer:9.1f} us")
    if peer_total:
        print(f"\nconvolutions: ours {ours_conv / 1e3:.3f} ms, cuDNN {peer_total / 1e3:.3f} ms "
              f"({ours_conv / peer_total:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
