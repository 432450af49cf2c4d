"""Issue 20 point 9 on a CPU device: a ViT-B/16-shaped and a BERT-base-shaped encoder (sequence
128, padding mask), written with onnx.helper in torch's export patterns
(tests/transformer_models.py, random weights), run by us and by ONNX Runtime (CPU) on the same
machine, interleaved round by round; the ratio of the medians is the figure (goal: at most 3x
ONNX Runtime). Also the share of our kernel time per op type, from one profiled run.

    python bench/transformers_cpu.py [--device CPU] [--rounds 7] [--only vit|bert]
                                     [--depth N] [--fused-attention]

--fused-attention also times the network with the attention fusion asked for
(Network(fuse_attention=True): off by default on a CPU device) in the same rounds, right after
the default's, and prints its time against it; --depth N builds N encoder blocks instead of 12;
--ort-no-spin turns ONNX Runtime's spinning threads off (its own runs get slower, ours after
them faster: by default the figure is conservative for us).
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def models(depth: int = 12):
    import transformer_models as tm
    return {
        "ViT-B/16 b1": lambda: tm.vit(batch=1, image=224, patch=16, dim=768, heads=12,
                                      depth=depth, mlp=3072, classes=1000),
        "BERT-base s128 b1": lambda: tm.bert(batch=1, seq=128, vocab=30522, dim=768, heads=12,
                                             layers=depth, ffn=3072, max_len=512, pad_from=100),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="")
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--fused-attention", action="store_true")
    ap.add_argument("--ort-no-spin", action="store_true",
                    help="ONNX Runtime's threads stop spinning after a run (not its default)")
    args = ap.parse_args()
    import numpy as np
    import onnx
    import onnxruntime as ort
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.observe import profile
    engine = Engine(args.device)
    print(f"device: {engine.device.name.strip()}; ONNX Runtime {ort.__version__} (CPU); "
          f"medians of {args.rounds} interleaved rounds")
    with tempfile.TemporaryDirectory(prefix="transformers-cpu-") as tmp:
        for name, make in models(args.depth).items():
            if args.only.lower() not in name.lower():
                continue
            model, feeds = make()
            path = Path(tmp) / "model.onnx"
            onnx.save(model, str(path))
            options = ort.SessionOptions()
            if args.ort_no_spin:
                # its threads spin on the cores after each run (its default): on 2 cores the run
                # after it (ours) took 15-20 ms more (ViT-B/16-sized, 2 blocks: 54.9 against
                # 39.4 ms); without spinning ONNX Runtime itself took 8-35% more
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
            net = Network(path, engine=engine)
            fused = Network(path, engine=engine, fuse_attention=True) \
                if args.fused_attention else None
            want = session.run(None, feeds)[0]
            got = list(net.infer(feeds).values())[0]
            err = float(np.abs(got - want).max() / np.abs(want).max())
            if fused is not None:
                fused.infer(feeds)
            ours, theirs, joined = [], [], []
            for _ in range(args.rounds):
                t = time.perf_counter()
                net.infer(feeds)
                ours.append(time.perf_counter() - t)
                if fused is not None:
                    t = time.perf_counter()
                    fused.infer(feeds)
                    joined.append(time.perf_counter() - t)
                t = time.perf_counter()
                session.run(None, feeds)
                theirs.append(time.perf_counter() - t)
            o, r = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
            print(f"{name:<20} ours {o:8.1f} ms   ONNX Runtime {r:8.1f} ms   ratio {o / r:5.2f}"
                  f"   max rel err {err:.1e}")
            if fused is not None:
                f = statistics.median(joined) * 1e3
                print(f"   attention fused: {f:.1f} ms, {f / o:.2f}x the default's")
            timed = Network(path, engine=engine, profiling=True)
            req = timed.create_request()
            req.infer(feeds)
            share = collections.Counter()
            for row in profile.collect(req):
                share[row.type] += row.ns
            total = sum(share.values())
            print("   kernel time: " + ", ".join(f"{t} {100 * ns / total:.0f}%"
                                                 for t, ns in share.most_common(5)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
