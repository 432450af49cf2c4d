"""Whole-model latency: each converted light ONNX model (random weights) through our executor,
against OpenVINO CPU and ONNX Runtime CPU on this machine (and PyTorch eager on a CUDA GPU for
ResNet-50 where torch is there), with each model's planned device memory against the sum of its
tensors. Ratios are taken in one run, with ours and the peers interleaved round by round (each
round times one inference of each), so that a noisy shared machine slows all of them alike;
absolute times mean something only on a quiet machine.

Each model's work is counted from its compiled plan (2 flops per multiply-add of every
convolution and MatMul step), and its GFLOP/s set against the device's fp32 peak: clock
(max_clock_frequency) x float vector width (preferred) x compute units x 2 FMA units x 2 flops.
The 2 FMA units are what x86 cores since Haswell have, and GPUs count differently: the percent
is meaningful on a CPU device.

    python bench/models.py [--device GPU] [--models resnet50,squeezenet] [--runs 10]
                           [--source ir|onnx] [--no-peers]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from customlayers.graph.load import read_model  # noqa: E402
from customlayers.runtime.device.device import Engine  # noqa: E402
from customlayers.runtime.compile.network import Network  # noqa: E402


def median_time(fn, runs: int, warmup: int = 2) -> float:
    return interleaved_medians([fn], runs, warmup)[0]


def interleaved_medians(fns, runs: int, warmup: int = 2) -> list[float]:
    """Median seconds of each callable, timed round by round: one call of each per round."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def step_flops(step) -> int:
    """2 x multiply-adds of a Convolution/GroupConvolution/MatMul step; 0 for the others."""
    kind = step.type.split("+")[0]          # a fused step is "Convolution+bias+relu"
    if kind in ("Convolution", "GroupConvolution") and len(step.input_descs) >= 2:
        w = step.input_descs[1].shape
        per_output = _numel(w[2:] if kind == "GroupConvolution" else w[1:])
        return 2 * _numel(step.output_descs[0].shape) * per_output
    if kind == "MatMul" and len(step.input_descs) >= 2:
        a, b = step.input_descs[0].shape, step.input_descs[1].shape
        # K is the dim A and B share: the one of A's last two that B's last two also have and
        # the output lacks (for square operands any choice gives the same count)
        k = a[-1] if len(a) == 1 or a[-1] in b[-2:] else a[-2]
        return 2 * _numel(step.output_descs[0].shape) * int(k)
    return 0


def device_peak_gflops(device) -> float:
    """fp32 peak: clock x preferred float vector width x compute units x 2 FMA units x 2."""
    width = int(device.preferred_vector_width_float) or int(device.native_vector_width_float) or 1
    return device.max_clock_frequency * 1e-3 * width * device.max_compute_units * 2 * 2


def have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:
        return False


def openvino_runner(xml: Path, x: np.ndarray):
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"})
    req = compiled.create_infer_request()
    return lambda: req.infer({0: x})


def onnxruntime_runner(onnx_path: Path, x: np.ndarray):
    import onnxruntime as ort
    options = ort.SessionOptions()
    # ORT's intra-op threads spin after each run by default; interleaved, they held both cores
    # while ours ran (SqueezeNet on PoCL measured 40 ms next to spinning ORT, 12.7 ms alone and
    # 12.6 ms with it not spinning; ORT itself was as fast either way)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda: sess.run(None, {name: x})


def torch_resnet50_runner():
    import torch
    import torchvision
    if not torch.cuda.is_available():
        return None
    # fp32 like ours: no TF32 tensor-core rounding in cuDNN convolutions or matmuls
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50(weights=None).eval().cuda()
    x = torch.randn(1, 3, 224, 224, device="cuda")

    def run():
        with torch.no_grad():
            model(x)
        torch.cuda.synchronize()
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default=None)
    ap.add_argument("--models", default=None, help="comma-separated names (default: all light models)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--source", choices=["ir", "onnx"], default=None,
                    help="read the IR (needs openvino to convert) or the ONNX model (default: ir "
                         "when openvino is installed)")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    import models as light                                  # tests/models.py
    names = args.models.split(",") if args.models else light.light_model_names()
    source = args.source or ("ir" if have("openvino") else "onnx")
    engine = Engine(args.device)
    peak = device_peak_gflops(engine.device)
    print(f"device: {engine.device.name.strip()} ({engine.device.platform.name.strip()}); "
          f"fp32 peak {peak:.0f} GFLOP/s; models read from {source}; median of {args.runs} "
          f"interleaved rounds")
    head = (f"{'model':<14} {'ours ms':>9} {'OV CPU ms':>10} {'ours/OV':>8} {'ORT CPU ms':>11} "
            f"{'ours/ORT':>9} {'GFLOP':>7} {'GFLOP/s':>8} {'% peak':>7} {'OV GF/s':>8} "
            f"{'planned MiB':>12} {'tensors MiB':>12} {'plan %':>7}")
    print(head)
    print("-" * len(head))
    for name in names:
        onnx_path = light.light_onnx(name)
        model_path = light.light_ir(name) if source == "ir" else onnx_path
        graph = read_model(model_path)
        net = Network(graph, None, engine)
        x = np.random.default_rng(0).standard_normal(
            net.plan.descs[net.plan.inputs[0][1]].shape).astype(np.float32)
        req = net.create_request()
        runners = {"ours": lambda: req.infer({net.plan.inputs[0][0]: x})}
        if not args.no_peers and have("openvino") and source == "ir":
            runners["ov"] = openvino_runner(model_path, x)
        if not args.no_peers and have("onnxruntime"):
            runners["ort"] = onnxruntime_runner(onnx_path, x)
        times = dict(zip(runners, interleaved_medians(list(runners.values()), args.runs)))
        ours, ov, ort = times["ours"], times.get("ov"), times.get("ort")
        gflop = sum(step_flops(s) for s in net.plan.steps) * 1e-9
        mem = net.plan.memory
        fmt = lambda t: f"{t * 1e3:.2f}" if t else "-"                 # noqa: E731
        ratio = lambda a, b: f"{a / b:.2f}" if b else "-"              # noqa: E731
        print(f"{name:<14} {fmt(ours):>9} {fmt(ov):>10} {ratio(ours, ov):>8} {fmt(ort):>11} "
              f"{ratio(ours, ort):>9} {gflop:>7.2f} {gflop / ours:>8.1f} "
              f"{gflop / ours / peak:>7.1%} {(f'{gflop / ov:.1f}' if ov else '-'):>8} "
              f"{mem.planned_bytes / 2**20:>12.1f} "
              f"{mem.total_tensor_bytes / 2**20:>12.1f} "
              f"{mem.planned_bytes / max(mem.total_tensor_bytes, 1):>7.0%}", flush=True)
        if name == "resnet50" and not args.no_peers and have("torch"):
            run = torch_resnet50_runner()
            if run is not None:
                t = median_time(run, args.runs, warmup=5)
                print(f"{'  torch eager':<14} {t * 1e3:>9.2f} ms on CUDA (torchvision resnet50, "
                      f"random weights): ours/torch = {ours / t:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
