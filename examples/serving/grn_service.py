"""A model with a custom OpenCL layer served over HTTP by Ray Serve, with dynamic batching.

    python examples/serving/grn_service.py [--port 8000] [-d CPU]   # http://127.0.0.1:8000/grn

POST a JSON body {"x": <one item as nested lists>} (here 3x16x16 floats); the answer is
{"y": <that item's output>}. Requests that arrive within `batch_wait_timeout_s` of each other are
run as one batch (`@serve.batch`), up to `max_batch_size` rows; each replica builds its network
once (CustomLayersPredictor) and runs a batch with several requests in flight. A request whose
item has the wrong shape is answered 400 on its own, before it can spoil a batch of others.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from customlayers.errors import CustomLayersError
from customlayers.integrations.ray import CustomLayersPredictor

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "examples" / "models" / "custom_node.onnx")
CONFIGS = [str(ROOT / "examples" / "layers" / "grn" / "grn.xml")]


@serve.deployment(ray_actor_options={"num_cpus": 1})
class CustomLayersService:
    def __init__(self, model: str, configs: list[str], device: str | None = None,
                 cache_dir: str | None = None, max_batch_size: int = 8,
                 batch_wait_timeout_s: float = 0.02):
        self.predictor = CustomLayersPredictor(model=model, configs=configs, device=device,
                                               cache_dir=cache_dir)
        (spec,) = self.predictor.inputs          # this service feeds models of one input
        self.input_name = spec.name
        self.item_shape = None if spec.shape is None else spec.shape[1:]
        self.predict.set_max_batch_size(max_batch_size)
        self.predict.set_batch_wait_timeout_s(batch_wait_timeout_s)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.02)
    async def predict(self, items: list[np.ndarray]) -> list[tuple[dict, int]]:
        # the device work runs in a thread, so the replica keeps taking (and batching)
        # requests meanwhile
        out = await asyncio.to_thread(self.predictor, {self.input_name: np.stack(items)})
        return [({name: column[i].tolist() for name, column in out.items()}, len(items))
                for i in range(len(items))]

    def _item(self, body) -> np.ndarray:
        if not isinstance(body, dict) or self.input_name not in body:
            raise ValueError(f"the body is a JSON object {{\"{self.input_name}\": [...]}}")
        item = np.asarray(body[self.input_name], dtype=np.float32)
        shape = self.item_shape
        if shape is not None and (item.ndim != len(shape) or any(
                d is not None and d != n for d, n in zip(shape, item.shape))):
            wanted = ["?" if d is None else d for d in shape]
            raise ValueError(f"'{self.input_name}' has shape {list(item.shape)}; one item of "
                             f"this model is {wanted}")
        return item

    async def __call__(self, request: Request) -> JSONResponse:
        try:
            item = self._item(await request.json())
        except ValueError as e:          # a bad JSON body too (json.JSONDecodeError)
            return JSONResponse({"error": str(e)}, status_code=400)
        try:
            outputs, batch = await self.predict(item)
        except CustomLayersError as e:
            return JSONResponse({"error": str(e)}, status_code=500)
        # how many requests shared this one's batch: shows the dynamic batching at work
        return JSONResponse(outputs, headers={"X-Batch-Size": str(batch)})


def build_app(model: str = MODEL, configs=CONFIGS, device: str | None = None,
              cache_dir: str | None = None, max_batch_size: int = 8,
              batch_wait_timeout_s: float = 0.02):
    # Serve lets a replica hold 5 requests by default, which would cap every batch at 5: let
    # it hold two batches' worth (one running, the next one filling)
    deployment = CustomLayersService.options(max_ongoing_requests=2 * max_batch_size)
    return deployment.bind(model, list(configs), device, cache_dir, max_batch_size,
                           batch_wait_timeout_s)


# `serve run --app-dir examples/serving --working-dir examples/serving grn_service:app` serves this
app = build_app()


def main(argv=None) -> None:
    import argparse
    import signal
    import sys
    import time

    import ray
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("-d", "--device", default=None, help="CPU, GPU, ... (default: the best)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray instance")
    args = parser.parse_args(argv)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    serve.run(build_app(device=args.device), route_prefix="/grn")
    print(f"serving http://127.0.0.1:{args.port}/grn (Ctrl-C stops)", flush=True)
    # a service manager stops with SIGTERM: shut Serve and Ray down then too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
