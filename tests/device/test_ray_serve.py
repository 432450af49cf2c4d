"""examples/serving: a local Ray Serve instance serves a model with a custom layer over HTTP;
concurrent real requests are batched and each answer equals a single-process run."""
from __future__ import annotations

import json
import socket
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ray_cases import GRN_MODEL, ROOT, plain_loop

pytest.importorskip("ray.serve", reason="Ray is the optional extra customlayers[ray]")

REQUESTS = 16
TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return answer.status, json.loads(answer.read()), dict(answer.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


@pytest.fixture(scope="module")
def served(ray_local):
    """The example's app on a free port (several people share this machine), shut down after."""
    from ray import cloudpickle, serve
    sys.path.insert(0, str(ROOT / "examples" / "serving"))
    try:
        import grn_service
    finally:
        sys.path.pop(0)
    # the replicas cannot import the example by name: ship its code with the deployment
    cloudpickle.register_pickle_by_value(grn_service)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        serve.run(grn_service.build_app(GRN_MODEL["model"], GRN_MODEL["configs"],
                                        GRN_MODEL["device"], batch_wait_timeout_s=0.1),
                  route_prefix="/grn")
        yield f"http://127.0.0.1:{port}/grn"
    finally:
        serve.shutdown()
        cloudpickle.unregister_pickle_by_value(grn_service)


def test_concurrent_http_requests_are_batched_and_equal_one_process(served):
    rows = np.random.default_rng(8).standard_normal((REQUESTS, 3, 16, 16)).astype(np.float32)
    with ThreadPoolExecutor(REQUESTS) as pool:
        answers = list(pool.map(lambda row: post(served, {"x": row.tolist()}), rows))
    expected = plain_loop(GRN_MODEL, rows)
    for i, (status, body, _) in enumerate(answers):
        assert status == 200, body
        np.testing.assert_array_equal(np.asarray(body["y"], np.float32), expected[i],
                                      err_msg=f"request {i}")
    batches = [int(headers["x-batch-size"]) for _, _, headers in answers]
    assert max(batches) > 1, f"no request was batched with another: {batches}"


def test_a_bad_request_is_answered_alone(served):
    status, body, _ = post(served, {"x": np.zeros((3, 8)).tolist()})
    assert status == 400
    assert body == {"error": "'x' has shape [3, 8]; one item of this model is [3, 16, 16]"}
    status, body, _ = post(served, {"image": []})
    assert (status, body) == (400, {"error": 'the body is a JSON object {"x": [...]}'})
