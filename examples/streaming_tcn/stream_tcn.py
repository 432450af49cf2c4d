"""The seed's TCN (shared/seeds/tcn-deployment-notes.txt) streamed one pixel at a time.

The deployment notes wanted "queues for each convolutional layer" so that "the network only
takes the latest pixel as input and uses past computations stored in each queue", and gave it
up because "stateful modules are not supported by both ONNX and TensorRT". Here the
whole-window model (8 temporal blocks of 25 channels, kernel 7, dilations 1..128, a 1x1
downsample, a linear head on the last step and a LogSoftmax, written with onnx.helper with
random weights) is given to `Network.streaming()`, which turns it into one step kernel with a
ring buffer per causal convolution. Each step takes one pixel per stream and gives the class
log-probabilities of the sequence so far; the read-out is the notes' "highest occurring output
over the last n outputs".

The stream is checked against the full-window model run on the input up to step t (the same
Network, compiled for that length) at a few steps, and at the last.

    python examples/streaming_tcn/stream_tcn.py [--device CPU|GPU] [--length 784] [--batch 1]
                                                [--last-n 100] [--check-steps 5]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from customlayers.api import CustomLayersError, Engine, Network  # noqa: E402

CHANNELS, LEVELS, KERNEL, CLASSES = 25, 8, 7, 10


def build_tcn(path: Path, seed: int = 0) -> Path:
    """The seed's TCN as an ONNX file whose time axis is dynamic (N x 1 x T): the pad-then-chomp
    convolutions torch exports (symmetric padding (k-1)*d, then a Slice of the last (k-1)*d
    steps), ReLUs, residual Adds, a 1x1 downsample, the last step gathered, Gemm, LogSoftmax."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    init, nodes = [], []

    def const(value, name, dtype=np.float32):
        init.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    x, cin = "x", 1
    for level in range(LEVELS):
        d = 2 ** level
        pad = (KERNEL - 1) * d
        h = x
        for j in (1, 2):
            c = f"b{level}c{j}"
            w = rng.standard_normal((CHANNELS, cin if j == 1 else CHANNELS, KERNEL))
            nodes.append(helper.make_node(
                "Conv", [h, const(w * 0.3 / np.sqrt(w[0].size), c + "w"),
                         const(rng.standard_normal(CHANNELS) * 0.1, c + "b")], [c],
                pads=[pad, pad], dilations=[d], kernel_shape=[KERNEL]))
            nodes.append(helper.make_node(
                "Slice", [c, const([0], c + "s0", np.int64), const([-pad], c + "s1", np.int64),
                          const([2], c + "ax", np.int64)], [c + "sl"]))
            nodes.append(helper.make_node("Relu", [c + "sl"], [c + "r"]))
            h = c + "r"
        res = x
        if cin != CHANNELS:
            nodes.append(helper.make_node(
                "Conv", [x, const(rng.standard_normal((CHANNELS, cin, 1)), f"b{level}dw"),
                         const(np.zeros(CHANNELS), f"b{level}db")], [f"b{level}d"],
                kernel_shape=[1]))
            res = f"b{level}d"
        nodes.append(helper.make_node("Add", [h, res], [f"b{level}a"]))
        nodes.append(helper.make_node("Relu", [f"b{level}a"], [f"b{level}o"]))
        x, cin = f"b{level}o", CHANNELS
    nodes.append(helper.make_node("Gather", [x, const(-1, "last", np.int64)], ["lastv"], axis=2))
    nodes.append(helper.make_node(
        "Gemm", ["lastv", const(rng.standard_normal((CLASSES, CHANNELS)) * 0.2, "fcw"),
                 const(np.zeros(CLASSES), "fcb")], ["fc"], transB=1))
    nodes.append(helper.make_node("LogSoftmax", ["fc"], ["y"], axis=1))
    graph = helper.make_graph(
        nodes, "tcn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", CLASSES])], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def majority(predictions: list, n: int) -> int:
    """The class that occurs most often among the last n predictions (the lowest on a tie)."""
    last = np.asarray(predictions[-n:])
    return int(np.bincount(last, minlength=CLASSES).argmax())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="CPU, GPU or a device name (default: best)")
    ap.add_argument("--length", type=int, default=784, help="pixels per sequence (784: MNIST)")
    ap.add_argument("--batch", type=int, default=1, help="independent streams (N)")
    ap.add_argument("--last-n", type=int, default=100, help="the read-out's window")
    ap.add_argument("--check-steps", type=int, default=5,
                    help="steps checked against the full-window model (the last among them)")
    ap.add_argument("--save-model", default=None, metavar="PATH",
                    help="also write the model (ONNX, N x 1 x T) there, for the command line")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except CustomLayersError as e:           # no device of that kind, a refusal: said plainly
        print(f"error: {e}", file=sys.stderr)
        return 2


def run(args) -> int:

    rng = np.random.default_rng(1)
    pixels = rng.random((args.batch, 1, args.length)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tcn(Path(args.save_model or Path(tmp) / "tcn.onnx"))
        net = Network(path, engine=Engine(args.device))
        stream = net.streaming(axis=-1)

        outputs, predictions, seconds = [], [], []
        for t in range(args.length):
            start = time.perf_counter()
            step = stream.step(pixels[:, :, t])          # [N, 1] in, {"y": [N, 10]} out
            seconds.append(time.perf_counter() - start)
            outputs.append(step["y"])
            predictions.append(step["y"].argmax(axis=1))

        # the full-window model on the input up to t, read at its last step
        checks = sorted({args.length} | {int(t) for t in np.linspace(
            1, args.length, max(args.check_steps, 1))})
        worst = 0.0
        for t in checks:
            full = net.infer({"x": pixels[:, :, :t]})["y"]
            # relative to the step's largest magnitude: a log-probability near 0 has no digits
            err = float(np.max(np.abs(full - outputs[t - 1])) / np.max(np.abs(full)))
            worst = max(worst, err)
        start = time.perf_counter()
        net.infer({"x": pixels})
        window = time.perf_counter() - start

    per_stream = [[p[n] for p in predictions] for n in range(args.batch)]
    votes = [majority(p, args.last_n) for p in per_stream]
    ms = np.asarray(seconds[1:] or seconds) * 1e3
    print(f"device: {net.engine.device.name.strip()}; {args.batch} stream(s) of "
          f"{args.length} pixels")
    print(f"read-out (the most frequent class of the last {args.last_n} steps): {votes}")
    print(f"per step: p50 {np.percentile(ms, 50):.3f} ms, p99 {np.percentile(ms, 99):.3f} ms; "
          f"the full window once: {window * 1e3:.2f} ms "
          f"({window * 1e3 / np.percentile(ms, 50):.1f}x a step)")
    ok = worst <= 1e-5
    print(f"stream vs full-window model at steps {checks}: max relative difference "
          f"{worst:.2e} ({'ok' if ok else 'MISMATCH'}, limit 1e-5)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
