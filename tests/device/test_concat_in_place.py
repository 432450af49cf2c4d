"""Concat in place (runtime/compile/concat_in_place.py): the layers before a Concat write into their
slices of its output and the Concat runs no kernel, with results equal to numpy and to the copy
path bit for bit; and every case where that would not be safe still copies, with the reason.
Graphs are built directly (interop_graphs.Builder: no OpenVINO needed)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

from customlayers.runtime.observe import profile
from customlayers.runtime.compile.compiler import plan_prefix
from customlayers.runtime.compile.concat_in_place import IN_PLACE_ENTRY
from customlayers.runtime.device.device import Engine
from customlayers.runtime.compile.network import Network
from customlayers.runtime.execute.request import InferRequest
from interop_graphs import Builder, relu_shift_ref

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "layers"
RNG = np.random.default_rng(31)
# Slices that should go in place are multiples of 4 KiB: aligned for every device's sub-buffers
# (CL_DEVICE_MEM_BASE_ADDR_ALIGN is 128 bytes on PoCL, 512 on NVIDIA)


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def _rand(shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _concat(b: Builder, parts, axis: int = 1, name: str = "cat"):
    shape = list(parts[0][1])
    shape[axis] = sum(p[1][axis] for p in parts)
    return b.op("Concat", parts, shape, {"axis": str(axis)}, name=name)


def _step(net, name: str):
    return next(s for s in net.plan.steps if s.name == name)


def _launches(net) -> int:
    return sum(len(s.launches) for s in net.plan.steps)


def _both(graph, engine, feed, **kwargs):
    """(in-place network, its outputs, copying network, its outputs); tuning off, so both run
    the same kernels and must agree bit for bit."""
    fast = Network(graph, None, engine, tuning="off", **kwargs)
    copy = Network(graph, None, engine, tuning="off", concat_in_place=False, **kwargs)
    return fast, fast.infer(feed), copy, copy.infer(feed)


def _assert_in_place(net, name: str = "cat") -> None:
    step = _step(net, name)
    assert net.plan.in_place[name] is None
    assert step.launches == [] and step.entry == IN_PLACE_ENTRY


def _assert_copies(net, why: str | None, name: str = "cat") -> None:
    step = _step(net, name)
    assert len(step.launches) == len(step.inputs) and step.entry == "concat_copy"
    if why is None:                    # not even a candidate: its slices are not contiguous
        assert name not in net.plan.in_place
    else:
        assert why in net.plan.in_place[name], net.plan.in_place[name]


# -- in place -----------------------------------------------------------------------------------
def _branches(b: Builder, x, w, bias):
    """Three producers of different kinds, the slice at the front computed last (a kernel that
    wrote past its slice would spoil one already written): a 3x3 convolution with its bias
    (fused: the Concat's input is an alias of the convolution's output), a max pool, and an
    Add + ReLU."""
    short = b.relu_shift(x, 0.25)
    pool = b.op("MaxPool", [x], x[1], {"strides": "1,1", "kernel": "3,3", "pads_begin": "1,1",
                                        "pads_end": "1,1"})
    conv = b.op("Convolution", [x, b.const(w)], (1, w.shape[0], *x[1][2:]),
                {"strides": "1,1", "dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1"})
    conv = b.op("Add", [conv, b.const(bias)], conv[1])
    return [conv, pool, short]


def _branches_ref(x, w, bias):
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[2:]
    conv = np.zeros((1, w.shape[0], h, wd), np.float64)
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", pad[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    conv += bias
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    pool = np.max([padded[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=0)
    return [conv, pool, relu_shift_ref(x, 0.25)]


def test_producers_write_their_slices_and_the_concat_runs_no_kernel(engine):
    w = (_rand((8, 4, 3, 3)) * 0.3).astype(np.float32)
    bias = _rand((1, 8, 1, 1))
    b = Builder("in_place")
    x = b.param("x", (1, 4, 16, 16))
    b.result(b.relu_shift(_concat(b, _branches(b, x, w, bias)), 0.1, name="y"))
    feed = {"x": _rand((1, 4, 16, 16))}
    fast, got, copy, want = _both(b.g, engine, feed)
    _assert_in_place(fast)
    _assert_copies(copy, "off")
    assert _launches(copy) - _launches(fast) == 3            # one copy kernel per input
    np.testing.assert_array_equal(got["y"], want["y"])
    ref = relu_shift_ref(np.concatenate(_branches_ref(feed["x"], w, bias), 1), 0.1)
    np.testing.assert_allclose(got["y"], ref, rtol=1e-5, atol=1e-5)
    # no buffers of their own: the three inputs are slices of the Concat's output
    memory = fast.plan.memory
    assert memory.in_place_tensors == 3 and "3 more written in place" in memory.summary()
    cat = _step(fast, "cat").outputs[0]
    assert cat in memory.slot_of
    assert [fast.plan.root(k) for k in _step(fast, "cat").inputs] == [cat] * 3
    assert [fast.plan.slice_at(k) for k in _step(fast, "cat").inputs] == \
        [0, 8 * 1024, 12 * 1024]


def test_the_concat_output_lives_from_the_first_producer_on(engine):
    """The first slice is written long before the Concat's step, and a chain of tensors that
    live and die in between would take its buffer if the plan gave it one only from there."""
    b = Builder("lifetime")
    x = b.param("x", (1, 4, 16, 16))
    early = b.relu_shift(x, 0.1)
    late = x
    for k in range(6):
        late = b.relu_shift(late, 0.05)
    b.result(b.relu_shift(_concat(b, [early, late]), 0.0, name="y"))
    feed = {"x": _rand((1, 4, 16, 16))}
    fast, got, _, want = _both(b.g, engine, feed)
    _assert_in_place(fast)
    cat = _step(fast, "cat")
    memory = fast.plan.memory
    assert not any(k in memory.slot_of for k in cat.inputs)
    # every tensor alive between the first write and the Concat has a buffer of its own
    first = next(i for i, s in enumerate(fast.plan.steps) if cat.inputs[0] in s.outputs)
    between = {fast.plan.root(k) for s in fast.plan.steps[first + 1:-2] for k in s.outputs}
    slot = memory.slot_of[cat.outputs[0]]
    assert between - {cat.outputs[0]} and \
        all(memory.slot_of[k] != slot for k in between - {cat.outputs[0]})
    ref = relu_shift_ref(np.concatenate([relu_shift_ref(feed["x"], 0.1),
                                         relu_shift_ref(feed["x"], *[0.05] * 6)], 1), 0.0)
    np.testing.assert_array_equal(got["y"], ref)
    np.testing.assert_array_equal(want["y"], ref)


def test_the_profile_shows_the_concat_in_place(engine):
    b = Builder("profiled")
    x = b.param("x", (1, 4, 16, 16))
    cat = _concat(b, [b.relu_shift(x, 0.1), b.relu_shift(x, 0.2)])
    b.result(b.relu_shift(cat, 0.0))
    net = Network(b.g, None, engine, profiling=True)
    req = net.create_request()
    req.infer({"x": _rand((1, 4, 16, 16))})
    rows = {r.name: r for r in profile.collect(req)}
    assert (rows["cat"].entry, rows["cat"].launches, rows["cat"].ns) == (IN_PLACE_ENTRY, 0, 0)
    assert all(r.launches == 1 for n, r in rows.items() if n != "cat")
    assert IN_PLACE_ENTRY in profile.format_table(list(rows.values()))


def test_concat_along_axis_0_runs_in_place(engine):
    b = Builder("batch")
    x = b.param("x", (2, 4, 16, 16))
    y = b.param("y", (3, 4, 16, 16))
    b.result(b.relu_shift(_concat(b, [b.relu_shift(x, 0.1), b.relu_shift(y, 0.2)], axis=0),
                          0.0, name="z"))
    feed = {"x": _rand((2, 4, 16, 16)), "y": _rand((3, 4, 16, 16))}
    fast, got, _, want = _both(b.g, engine, feed)
    _assert_in_place(fast)
    ref = np.concatenate([relu_shift_ref(feed["x"], 0.1), relu_shift_ref(feed["y"], 0.2)], 0)
    np.testing.assert_array_equal(got["z"], ref)
    np.testing.assert_array_equal(want["z"], ref)


def test_nested_concats_all_lie_in_the_last_output(engine):
    """DenseNet's pattern: each Concat joins the previous one's output and a new feature map;
    every one of them goes in place, all in the last one's buffer, and the earlier outputs are
    still read (by their own consumers) as slices."""
    b = Builder("dense")
    x = b.param("x", (1, 4, 16, 16))
    feed = {"x": _rand((1, 4, 16, 16))}
    feats, ref = b.relu_shift(x, 0.0), relu_shift_ref(feed["x"], 0.0)
    for k in range(3):
        shift = 0.1 * (k + 1)
        new = b.relu_shift(feats, shift)                  # reads the previous Concat's output
        feats = _concat(b, [feats, new], name=f"cat{k}")
        ref = np.concatenate([ref, relu_shift_ref(ref, shift)], 1)
    b.result(b.relu_shift(feats, 0.0, name="y"))
    fast, got, _, want = _both(b.g, engine, feed)
    for k in range(3):
        _assert_in_place(fast, f"cat{k}")
    last = _step(fast, "cat2").outputs[0]
    assert all(fast.plan.root(_step(fast, f"cat{k}").outputs[0]) == last for k in range(3))
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], ref)


def _dense_block_anew(b: Builder, x, feed, last_is_output: bool):
    """torchvision's DenseNet: each layer joins all the features so far anew (its Concat's
    inputs are the previous Concat's inputs and one more), and a last Concat joins them all.
    Returns the numpy reference of the result."""
    feats, refs = [b.relu_shift(x, 0.0)], [relu_shift_ref(feed["x"], 0.0)]
    for k in range(3):
        cat = _concat(b, feats, name=f"cat{k}")
        ref = np.concatenate(refs, 1)
        feats.append(b.relu_shift(cat, 0.1 * (k + 1)))       # reads the whole Concat
        refs.append(relu_shift_ref(ref, 0.1 * (k + 1)))
    last = _concat(b, feats, name="last")
    if last_is_output:
        b.result(last)
        return np.concatenate(refs, 1)
    b.result(b.relu_shift(last, 0.0, name="y"))
    return relu_shift_ref(np.concatenate(refs, 1), 0.0)


def test_concats_that_join_all_the_features_anew_lie_in_the_last_one(engine):
    """Each Concat's output is the front of the next one's: the last is placed first, the
    shorter ones are its front, and no Concat copies (torchvision's DenseNet-121: 593 copy
    launches an inference before, none after)."""
    b = Builder("dense_anew")
    x = b.param("x", (1, 4, 16, 16))
    feed = {"x": _rand((1, 4, 16, 16))}
    ref = _dense_block_anew(b, x, feed, last_is_output=False)
    fast, got, copy, want = _both(b.g, engine, feed)
    for name in ("cat0", "cat1", "cat2", "last"):
        _assert_in_place(fast, name)
    last = _step(fast, "last").outputs[0]
    assert all(fast.plan.root(_step(fast, f"cat{k}").outputs[0]) == last for k in range(3))
    assert _launches(copy) - _launches(fast) == 1 + 2 + 3 + 4
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], ref)


def test_a_chain_whose_longest_concat_copies_places_the_next_longest(engine):
    """The last Concat is a network output, so it copies (reading its slices); the next
    longest then goes in place by itself, and the shorter ones are its front."""
    b = Builder("dense_anew_out")
    x = b.param("x", (1, 4, 16, 16))
    feed = {"x": _rand((1, 4, 16, 16))}
    ref = _dense_block_anew(b, x, feed, last_is_output=True)
    fast, got, _, want = _both(b.g, engine, feed)
    _assert_copies(fast, "its output is a network output", name="last")
    for name in ("cat0", "cat1", "cat2"):
        _assert_in_place(fast, name)
    cat2 = _step(fast, "cat2").outputs[0]
    assert all(fast.plan.root(_step(fast, f"cat{k}").outputs[0]) == cat2 for k in range(2))
    (out,) = got
    np.testing.assert_array_equal(got[out], want[out])
    np.testing.assert_array_equal(got[out], ref)


def test_a_slice_read_by_a_python_and_a_custom_layer(tmp_path, engine):
    """Other readers of an input get its slice: a Python layer (the host maps a sub-buffer) and
    a custom kernel (bound to one), beside the Concat that holds it."""
    from customlayers.runtime.layers.registry import Registry
    b = Builder("readers")
    x = b.param("x", (1, 4, 16, 16))
    u = b.op("Add", [x, b.const(np.float32(0.5))], x[1])
    v = b.op("Add", [x, b.const(np.float32(-0.5))], x[1])
    b.result(b.op("Sigmoid", [_concat(b, [u, v])], (1, 8, 16, 16), name="s"))
    b.result(b.op("ReLU", [v], v[1], name="relu_v"))
    feed = {"x": _rand((1, 4, 16, 16))}
    want_cat = 1 / (1 + np.exp(-np.concatenate([feed["x"] + 0.5, feed["x"] - 0.5], 1)))
    for load in ("python", "custom"):
        reg = Registry(engine)
        if load == "python":
            reg.load_python(EXAMPLES / "relu" / "relu_reference.py")
        else:
            reg.load(EXAMPLES / "relu" / "relu.xml")
        net = Network(b.g, reg, engine)
        assert _step(net, "relu_v").impl == load
        _assert_in_place(net)
        out = net.infer(feed)
        np.testing.assert_allclose(out["s"], want_cat, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(out["relu_v"], np.maximum(feed["x"] - 0.5, 0))


def test_a_debugging_run_reads_a_slice_as_its_own_tensor(engine):
    """plan_prefix (how --check-bounds captures a layer's inputs) reads a tensor that lies in
    a Concat's output at its offset."""
    b = Builder("prefix")
    x = b.param("x", (1, 4, 16, 16))
    u, v = b.relu_shift(x, 0.1), b.relu_shift(x, 0.3)
    b.result(b.relu_shift(_concat(b, [u, v]), 0.0))
    net = Network(b.g, None, engine)
    _assert_in_place(net)
    cat = _step(net, "cat")
    index = net.plan.steps.index(cat)
    prefix = plan_prefix(net.plan, index, [("u", cat.inputs[0]), ("v", cat.inputs[1])])
    feed = {"x": _rand((1, 4, 16, 16))}
    seen = InferRequest(net, prefix).infer(feed)
    np.testing.assert_array_equal(seen["u"], relu_shift_ref(feed["x"], 0.1))
    np.testing.assert_array_equal(seen["v"], relu_shift_ref(feed["x"], 0.3))


def test_an_out_of_order_queue_waits_for_every_producer(test_device):
    ooo = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    ctx = cl.Context([test_device])
    try:
        queue = cl.CommandQueue(ctx, test_device, properties=ooo)
    except cl.Error:
        pytest.skip("the device has no out-of-order queues")
    b = Builder("ooo")
    x = b.param("x", (1, 4, 16, 16))
    parts = [b.relu_shift(b.relu_shift(x, 0.1 * k), 0.05) for k in range(4)]
    b.result(b.relu_shift(_concat(b, parts), 0.0, name="y"))
    net = Network(b.g, None, Engine.from_queue(queue))
    _assert_in_place(net)
    for seed in range(3):
        x_in = np.random.default_rng(seed).standard_normal((1, 4, 16, 16)).astype(np.float32)
        want = np.concatenate([relu_shift_ref(x_in, 0.1 * k, 0.05) for k in range(4)], 1)
        np.testing.assert_array_equal(net.infer({"x": x_in})["y"], want)


# -- where it copies ----------------------------------------------------------------------------
def _fallback_case(case: str):
    """(graph, feed, numpy reference of the output 'y', the reason the Concat copies; None when
    it is no candidate at all)."""
    b = Builder(case)
    shape = (2, 4, 16, 16) if case == "batch 2" else (1, 4, 16, 16)
    x = b.param("x", shape)
    feed = {"x": _rand(shape)}
    u, ru = b.relu_shift(x, 0.1), relu_shift_ref(feed["x"], 0.1)
    v, rv = b.relu_shift(x, 0.2), relu_shift_ref(feed["x"], 0.2)
    why = None
    if case == "batch 2":
        cat, ref = _concat(b, [u, v]), np.concatenate([ru, rv], 1)
    elif case == "network input":
        cat, ref, why = _concat(b, [u, x]), np.concatenate([ru, feed["x"]], 1), \
            "input 1 is a network input"
    elif case == "constant":
        k = _rand(shape)
        cat, ref, why = _concat(b, [b.const(k), u]), np.concatenate([k, ru], 1), \
            "input 0 is a constant"
    elif case == "same tensor twice":
        cat, ref, why = _concat(b, [u, v, u]), np.concatenate([ru, rv, ru], 1), \
            "input 2 is input 0 again"
    elif case == "input is a network output":
        b.result(u)
        cat, ref, why = _concat(b, [u, v]), np.concatenate([ru, rv], 1), \
            "input 0 is a network output"
    elif case == "misaligned slice":     # 3 channels of 6x6 floats: 432 bytes, no 128 multiple
        x6 = b.param("x6", (1, 3, 6, 6))
        feed["x6"] = _rand((1, 3, 6, 6))
        w6, rw6 = b.relu_shift(x6, 0.1), relu_shift_ref(feed["x6"], 0.1)
        cat, ref, why = _concat(b, [w6, b.relu_shift(x6, 0.2)]), \
            np.concatenate([rw6, relu_shift_ref(feed["x6"], 0.2)], 1), "would start at byte 432"
    elif case == "view of another shape":
        flat = b.reshape(b.relu_shift(b.reshape(x, (1, 1024)), 0.3), (1, 4, 16, 16))
        cat, ref, why = _concat(b, [u, flat]), \
            np.concatenate([ru, relu_shift_ref(feed["x"], 0.3)], 1), \
            "input 1 is a view of a tensor of another shape"
    elif case == "input of two concats":
        first = _concat(b, [u, v], name="first")
        cat = _concat(b, [v, u])
        b.result(b.relu_shift(first, 0.0))
        ref, why = np.concatenate([rv, ru], 1), "already written into another Concat's output"
    else:
        raise AssertionError(case)
    y = b.relu_shift(cat, 0.0, name="y")
    b.result(y)
    return b.g, feed, relu_shift_ref(ref, 0.0), why


@pytest.mark.parametrize("case", ["batch 2", "network input", "constant", "same tensor twice",
                                  "input is a network output", "misaligned slice",
                                  "view of another shape", "input of two concats"])
def test_unsafe_cases_copy_and_stay_right(engine, case):
    graph, feed, ref, why = _fallback_case(case)
    fast, got, copy, want = _both(graph, engine, feed)
    _assert_copies(fast, why)
    np.testing.assert_array_equal(got["y"], ref)
    np.testing.assert_array_equal(want["y"], ref)
    if case == "input of two concats":       # the first Concat took the shared inputs
        _assert_in_place(fast, "first")


def test_a_concat_that_is_a_network_output_copies(engine):
    """The user may hand the output a buffer of their own (set_tensor): it must be written
    there whole, so the producers keep their buffers."""
    b = Builder("out")
    x = b.param("x", (1, 4, 16, 16))
    cat = _concat(b, [b.relu_shift(x, 0.1), b.relu_shift(x, 0.2)])
    b.result(b.reshape(cat, (1, 2048)))
    net = Network(b.g, None, engine)
    _assert_copies(net, "its output is a network output")
    feed = {"x": _rand((1, 4, 16, 16))}
    want = np.concatenate([relu_shift_ref(feed["x"], 0.1), relu_shift_ref(feed["x"], 0.2)],
                          1).reshape(1, 2048)
    req = net.create_request()
    out = np.empty((1, 2048), np.float32)
    req.set_tensor(net.output_names[0], out)
    req.infer(feed)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("load", ["custom", "python"])
def test_inputs_computed_by_custom_or_python_layers_are_copied(engine, load):
    from customlayers.runtime.layers.registry import Registry
    b = Builder(load)
    x = b.param("x", (1, 4, 16, 16))
    u = b.op("Add", [x, b.const(np.float32(0.5))], x[1])
    r = b.op("ReLU", [b.op("Add", [x, b.const(np.float32(-0.5))], x[1])], x[1])
    b.result(b.relu_shift(_concat(b, [u, r]), 0.0, name="y"))
    reg = Registry(engine)
    if load == "python":
        reg.load_python(EXAMPLES / "relu" / "relu_reference.py")
        why = "input 1 is computed on the host"
    else:
        reg.load(EXAMPLES / "relu" / "relu.xml")
        why = "input 1 is computed by a custom layer"
    net = Network(b.g, reg, engine)
    _assert_copies(net, why)
    feed = {"x": _rand((1, 4, 16, 16))}
    want = np.maximum(np.concatenate([feed["x"] + 0.5, np.maximum(feed["x"] - 0.5, 0)], 1), 0)
    np.testing.assert_allclose(net.infer(feed)["y"], want, rtol=1e-6, atol=1e-6)


def test_a_nested_concat_whose_outer_one_copies(engine):
    """The inner Concat goes in place in its own output; the outer one copies it (its other
    input is a network input)."""
    b = Builder("nested_copy")
    x = b.param("x", (1, 4, 16, 16))
    inner = _concat(b, [b.relu_shift(x, 0.1), b.relu_shift(x, 0.2)], name="inner")
    b.result(b.relu_shift(_concat(b, [inner, x], name="cat"), 0.0, name="y"))
    feed = {"x": _rand((1, 4, 16, 16))}
    fast, got, _, want = _both(b.g, engine, feed)
    _assert_in_place(fast, "inner")
    _assert_copies(fast, "input 1 is a network input")
    ref = relu_shift_ref(np.concatenate([relu_shift_ref(feed["x"], 0.1),
                                         relu_shift_ref(feed["x"], 0.2), feed["x"]], 1), 0.0)
    np.testing.assert_array_equal(got["y"], ref)
    np.testing.assert_array_equal(want["y"], ref)


# -- the light models that concatenate ------------------------------------------------------------
@pytest.mark.parametrize("name,in_place", [
    ("squeezenet", 8), ("shufflenet", 2),
    pytest.param("inception_v1", 7, marks=pytest.mark.slow),
    pytest.param("inception_v2", 10, marks=pytest.mark.slow),
    pytest.param("densenet121", 58, marks=pytest.mark.slow)])
def test_light_models_run_their_concats_in_place_with_the_same_numbers(engine, name, in_place):
    """The copy path's numbers bit for bit (tests/conformance compares both with OpenVINO);
    the counts are those of 128-byte sub-buffer alignment (PoCL): a device that asks for more
    places fewer."""
    pytest.importorskip("onnx")
    from models import light_onnx            # ONNX: the GPU machine has no OpenVINO to convert
    model = light_onnx(name)
    fast = Network(model, None, engine, tuning="off")
    copy = Network(model, None, engine, tuning="off", concat_in_place=False)
    placed = sum(why is None for why in fast.plan.in_place.values())
    if int(engine.device.mem_base_addr_align) == 1024:
        assert placed == in_place, fast.plan.in_place
    assert _launches(copy) - _launches(fast) == sum(
        len(s.inputs) for s in fast.plan.steps if s.entry == IN_PLACE_ENTRY)
    shapes = {p.name: p.outputs[0].shape for p in fast.graph.parameters}
    feed = {n: np.random.default_rng(7).standard_normal(s).astype(np.float32)
            for n, s in shapes.items()}
    got, want = fast.infer(feed), copy.infer(feed)
    for out in want:
        np.testing.assert_array_equal(got[out], want[out], err_msg=out)
