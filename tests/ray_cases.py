"""What the Ray tests share: the example models with custom layers, the plain single-process
loop their results are compared with, models and layers made to fail, and a local Ray instance
on a bounded number of CPUs."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"
LAYERS = ROOT / "examples" / "layers"
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it

# 1x3x16x16 (a fixed batch of 1) -> Conv -> Relu -> GRN (custom) -> MaxPool -> 1x4x8x8
GRN_MODEL = dict(model=str(MODELS / "custom_node.onnx"),
                 configs=[str(LAYERS / "grn" / "grn.xml")], device=TEST_DEVICE)
# Nx4x6x8 (a dynamic batch) -> ReorgYolo (custom) -> Sigmoid -> Nx16x3x4
REORG_MODEL = dict(model=str(MODELS / "reorg_dynamic.onnx"),
                   configs=[str(LAYERS / "reorg" / "reorg.xml")], device=TEST_DEVICE)

# Ray on a shared 2-core machine: 2 CPUs (one per actor), a small object store, no dashboard
RAY_CPUS = 2
RAY_OBJECT_STORE = 80 * 1024 * 1024


def plain_loop(case: dict, rows: np.ndarray) -> np.ndarray:
    """The reference: one process, one network, one row at a time (a batch of 1), stacked."""
    from customlayers.integrations.network_setup import build_network
    net = build_network(case["model"], case["configs"], device=case["device"])
    name = net.input_names[0]
    outs = [net.infer({name: row[None]}) for row in rows]
    (out_name,) = outs[0]
    return np.concatenate([o[out_name] for o in outs])


def fixed_batch_reorg(folder: Path, batch: int) -> str:
    """reorg_dynamic.onnx with its batch dimension fixed at `batch`."""
    import onnx
    model = onnx.load(str(MODELS / "reorg_dynamic.onnx"))
    g = model.graph
    for info in [*g.input, *g.output, *g.value_info]:
        dim = info.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_param")
        dim.dim_value = batch
    path = folder / f"reorg_batch{batch}.onnx"
    onnx.save(model, str(path))
    return str(path)


def broken_reorg_layer(folder: Path) -> str:
    """reorg.xml next to a reorg.cl that does not compile (at line 3 of the kernel file)."""
    shutil.copy(LAYERS / "reorg" / "reorg.xml", folder / "reorg.xml")
    (folder / "reorg.cl").write_text(
        "__kernel void reorg_kernel(const __global INPUT0_TYPE* src,\n"
        "                           __global OUTPUT0_TYPE* dst) {\n"
        "    dst[0] = src[0] +;\n"
        "}\n")
    return str(folder / "reorg.xml")


def start_ray():
    """A local Ray instance on RAY_CPUS CPUs; the caller shuts it down."""
    import ray
    ray.init(num_cpus=RAY_CPUS, object_store_memory=RAY_OBJECT_STORE, include_dashboard=False,
             configure_logging=False, log_to_driver=False)
    return ray
