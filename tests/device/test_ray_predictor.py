"""CustomLayersPredictor in one process (no Ray): batches of every kind of batch dimension give
the rows of a plain loop; its options reach the network; its errors name the model."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import DeviceError, KernelBuildError, ModelError
from customlayers.integrations.placement import POCL_THREADS, choose_device, limit_pocl_threads
from customlayers.integrations.ray import CustomLayersPredictor

from ray_cases import (GRN_MODEL, LAYERS, REORG_MODEL, TEST_DEVICE, broken_reorg_layer,
                       fixed_batch_reorg, plain_loop)

RNG = np.random.default_rng(13)


@pytest.fixture(scope="module")
def grn():
    return CustomLayersPredictor(**GRN_MODEL)


@pytest.fixture(scope="module")
def reorg():
    return CustomLayersPredictor(**REORG_MODEL)


def test_fixed_batch_of_one_runs_row_by_row_in_flight(grn):
    rows = RNG.standard_normal((11, 3, 16, 16)).astype(np.float32)
    out = grn({"data": rows})               # one column, any name: the model's one input
    assert list(out) == ["y"]
    np.testing.assert_array_equal(out["y"], plain_loop(GRN_MODEL, rows))
    # rows that keep the model's leading 1 are the same items
    again = grn(rows[:, None])
    np.testing.assert_array_equal(again["y"], out["y"])


def test_dynamic_batch_takes_every_size_and_passes_other_columns(reorg):
    rows = RNG.standard_normal((13, 4, 6, 8)).astype(np.float32)
    ids = np.arange(100, 113)
    expected = plain_loop(REORG_MODEL, rows)
    for start, stop in ((0, 8), (8, 13)):   # a full batch, then the partial last one
        out = reorg({"x": rows[start:stop], "id": ids[start:stop]})
        np.testing.assert_array_equal(out["y"], expected[start:stop])
        np.testing.assert_array_equal(out["id"], ids[start:stop])


def test_fixed_batch_of_three_pads_the_last_request(tmp_path):
    case = dict(REORG_MODEL, model=fixed_batch_reorg(tmp_path, 3))
    rows = RNG.standard_normal((7, 4, 6, 8)).astype(np.float32)
    out = CustomLayersPredictor(**case)({"x": rows})
    assert out["y"].shape == (7, 16, 3, 4)
    np.testing.assert_array_equal(out["y"], plain_loop(REORG_MODEL, rows))


def test_nireq_one_equals_several_in_flight(grn):
    rows = RNG.standard_normal((6, 3, 16, 16)).astype(np.float32)
    one = CustomLayersPredictor(**GRN_MODEL, nireq=1)({"x": rows})
    np.testing.assert_array_equal(one["y"], grn({"x": rows})["y"])


def test_pinned_uploads_give_the_same_rows_for_every_batch_kind(tmp_path):
    """pinned=True: rows copied into pinned buffers kept from batch to batch; a batch of
    another size (the dynamic model's partial last one, a padded fixed batch) gets requests
    of its own, and the earlier ones are reused when that size comes back."""
    rows = RNG.standard_normal((13, 4, 6, 8)).astype(np.float32)
    expected = plain_loop(REORG_MODEL, rows)
    dynamic = CustomLayersPredictor(**REORG_MODEL, pinned=True, nireq=2)
    made = []
    for start, stop in ((0, 8), (8, 13), (0, 8)):
        out = dynamic({"x": rows[start:stop]})
        np.testing.assert_array_equal(out["y"], expected[start:stop])
        made.append({id(r) for pool in dynamic._pinned._pools.values() for r in pool})
    pools = dynamic._pinned._pools
    assert len(pools) == 2                          # one set of requests per batch size
    assert all(1 <= len(pool) <= 2 for pool in pools.values())     # at most nireq each
    assert made[2] == made[1]                       # the first size's requests reused
    fixed = CustomLayersPredictor(**dict(REORG_MODEL, model=fixed_batch_reorg(tmp_path, 3)),
                                  pinned=True, nireq=2)
    first = fixed({"x": rows[:7]})                   # 3 requests in flight, the last padded
    np.testing.assert_array_equal(first["y"], expected[:7])
    # the outputs are the caller's: the next batch rewrites the pinned memory, not them
    second = fixed({"x": rows[7:]})
    np.testing.assert_array_equal(first["y"], expected[:7])
    np.testing.assert_array_equal(second["y"], expected[7:])
    grn_rows = RNG.standard_normal((5, 3, 16, 16)).astype(np.float32)
    out = CustomLayersPredictor(**GRN_MODEL, pinned=True)({"x": grn_rows})
    np.testing.assert_array_equal(out["y"], plain_loop(GRN_MODEL, grn_rows))


def test_a_pinned_batch_names_each_request_once():
    """Each request's inputs are named (checked, converted) once per batch, not once to pick
    its requests and again to run them."""
    actor = CustomLayersPredictor(**GRN_MODEL, pinned=True, nireq=2)
    real, named = actor.network._named_inputs, []
    actor.network._named_inputs = lambda item: named.append(item) or real(item)
    rows = RNG.standard_normal((5, 3, 16, 16)).astype(np.float32)
    for _ in range(2):
        named.clear()
        out = actor({"x": rows})
        np.testing.assert_array_equal(out["y"], plain_loop(GRN_MODEL, rows))
        assert len(named) == 5                      # a batch of one: a request per row


def test_pinned_requests_run_an_iterable_of_requests(grn):
    """PinnedRequests.run takes its requests from a generator too (it was read twice: the
    second pass, the one that ran them, found it empty and returned nothing)."""
    from customlayers.integrations.inflight import PinnedRequests
    rows = RNG.standard_normal((3, 1, 3, 16, 16)).astype(np.float32)
    got = PinnedRequests(grn.network, 2).run({"x": row} for row in rows)
    assert len(got) == 3
    for row, out in zip(rows, got):
        np.testing.assert_array_equal(out["y"], grn.network.infer({"x": row})["y"])


def test_a_compiled_package_runs_without_configs(tmp_path):
    """An actor that loads a package (customlayers compile) builds and tunes nothing, and
    needs no descriptor: its rows equal the model's own."""
    from customlayers.integrations.network_setup import build_network
    from customlayers.runtime.compile.packaged import save_package
    rows = RNG.standard_normal((10, 4, 6, 8)).astype(np.float32)
    expected = plain_loop(REORG_MODEL, rows)
    fixed = build_network(fixed_batch_reorg(tmp_path, 4), REORG_MODEL["configs"],
                          device=TEST_DEVICE)
    # the model's batch is open; the package holds it for 2 and 4 rows: requests of 4
    # (the largest compiled), the last padded, never a batch of another size
    dynamic = build_network(REORG_MODEL["model"], REORG_MODEL["configs"], device=TEST_DEVICE)
    dynamic.plan_for({"x": (2, 4, 6, 8)})
    dynamic.plan_for({"x": (4, 4, 6, 8)})
    for name, net in (("fixed", fixed), ("open", dynamic)):
        package = tmp_path / f"reorg_{name}.clpkg"
        save_package(net, package)
        for pinned in (False, True):
            actor = CustomLayersPredictor(model=package, device=TEST_DEVICE, pinned=pinned)
            assert actor.inputs[0].shape == (4, 4, 6, 8)
            out = actor({"x": rows})
            np.testing.assert_array_equal(out["y"], expected)


def test_cache_dir_receives_the_programs(tmp_path):
    CustomLayersPredictor(**GRN_MODEL, cache_dir=tmp_path / "shared")
    entries = list((tmp_path / "shared" / "programs").glob("*/meta.json"))
    assert entries, "no program was written to the configured cache directory"


def test_bad_rows_name_the_model_and_the_shape(grn):
    with pytest.raises(ModelError, match=r"custom_node\.onnx.*rows of shape \[3, 16\]; the "
                                         r"model's input is \[1, 3, 16, 16\]"):
        grn({"x": np.zeros((2, 3, 16), np.float32)})
    with pytest.raises(ModelError, match=r"columns \(a, b\) do not name the model's input"):
        grn({"a": np.zeros((2, 3, 16, 16)), "b": np.zeros((2, 3, 16, 16))})
    with pytest.raises(TypeError, match="a batch is a dict of numpy arrays"):
        grn([np.zeros((3, 16, 16))])


def test_missing_model_names_the_working_directory():
    with pytest.raises(ModelError, match=r"CustomLayersPredictor for model 'no_such\.onnx' on "
                                         r".*\(working directory .*\): no_such\.onnx: no such "
                                         r"model file"):
        CustomLayersPredictor("no_such.onnx", device=TEST_DEVICE)


def test_layer_that_does_not_build_fails_at_the_first_batch(tmp_path):
    # a dynamic model compiles per batch size: the kernel's error comes with the first batch
    broken = CustomLayersPredictor(REORG_MODEL["model"], [broken_reorg_layer(tmp_path)],
                                   device=TEST_DEVICE)
    with pytest.raises(KernelBuildError, match=r"reorg\.cl:3"):
        broken({"x": np.zeros((2, 4, 6, 8), np.float32)})


def test_tuning_reaches_the_network():
    assert CustomLayersPredictor(**GRN_MODEL, tuning="off").network.tuner.mode == "off"
    with pytest.raises(ValueError, match="tuning"):
        CustomLayersPredictor(**GRN_MODEL, tuning="fastest")


def test_python_layers_run_in_the_predictor(grn):
    # the GRN example's own Python reference layer, in place of its kernel
    case = dict(GRN_MODEL, configs=[], python_layers=[str(LAYERS / "grn" / "grn_reference.py")])
    rows = RNG.standard_normal((4, 3, 16, 16)).astype(np.float32)
    on_host = CustomLayersPredictor(**case)({"x": rows})["y"]
    np.testing.assert_allclose(on_host, grn({"x": rows})["y"], rtol=1e-5, atol=1e-6)


def test_ray_gpu_on_a_machine_without_one_is_a_clear_error():
    if any("GPU" in n for n in _device_names()):
        pytest.skip("this machine has an OpenCL GPU")
    with pytest.raises(DeviceError, match=r"Ray assigned GPU 0 to this worker, but OpenCL "
                                          r"lists no GPU here"):
        choose_device("GPU", gpu_ids=(0,))
    # an explicit selector is the user's choice, GPUs assigned or not
    import pyopencl as cl
    assert choose_device("CPU", gpu_ids=(0,)).type & cl.device_type.CPU


def _device_names():
    from customlayers.runtime.device.device import device_index_names
    return device_index_names()


def test_pocl_thread_cap_keeps_the_users_own():
    env = {}
    assert limit_pocl_threads(2, env) and env == {POCL_THREADS: "2"}
    env = {POCL_THREADS: "7"}
    assert not limit_pocl_threads(2, env) and env == {POCL_THREADS: "7"}


def test_pinned_batches_from_two_threads_keep_their_own_rows():
    """Two batches at once on one pinned predictor (an actor with concurrent calls, a Serve
    replica): each gets its own rows back, never the other's copied into the same request."""
    import threading
    actor = CustomLayersPredictor(**REORG_MODEL, pinned=True, nireq=2)
    batches = [RNG.standard_normal((8, 4, 6, 8)).astype(np.float32) for _ in range(6)]
    expected = [plain_loop(REORG_MODEL, b) for b in batches]
    got = [None] * len(batches)

    def work(indices):
        for i in indices:
            got[i] = actor({"x": batches[i]})["y"]
    threads = [threading.Thread(target=work, args=(range(k, len(batches), 2),)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(g, e, err_msg=f"batch {i}")
