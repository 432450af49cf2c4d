"""Kernel selection by timing (runtime/tuning/tuning.py): every variant computes what numpy computes,
the tuner times candidates on the device and keeps its choice on disk, and a second load
times nothing."""
from __future__ import annotations

import json

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._variants import GemmVariant
from launch_runner import run_launches
from oracle import ov_infer, save_ov_model

GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256)


def _conv_ref(x, w, stride=1, pad=0):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    groups = c // cg
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for ky in range(kh):
            for kx in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, ky:ky + stride * oh:stride,
                           kx:kx + stride * ow:stride]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, ky, kx])
    return out


def _run_variant(cl_env, op_type, attrs, arrays, variant, epilogue=None):
    op = get_op(op_type)
    parsed = op.parse_attributes(attrs, "layer")
    descs = [TensorDesc(a.shape) for a in arrays]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(parsed, descs[:2], {})]
    ctx = CompileContext(GPU, epilogue=epilogue, variant=variant)
    variants = op.kernel_variants(parsed, descs, out, {}, ctx)
    launches = op.launches(parsed, descs, out, {}, ctx)
    return run_launches(cl_env, launches, arrays, descs, out, shaped_for=ctx)[0], variants


CONV = {"strides": "1,1", "dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1"}
CONV_1X1 = {"strides": "1,1", "dilations": "1,1", "pads_begin": "0,0", "pads_end": "0,0"}


@pytest.mark.parametrize("attrs,wshape,pad", [(CONV, (24, 16, 3, 3), 1),
                                               (CONV_1X1, (40, 16, 1, 1), 0)])
def test_every_convolution_variant_matches_numpy(cl_env, attrs, wshape, pad):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 9, 11)).astype(np.float32)
    w = (rng.standard_normal(wshape) * 0.2).astype(np.float32)
    want = _conv_ref(x, w, pad=pad)
    _, variants = _run_variant(cl_env, "Convolution", attrs, [x, w], None)
    assert len(variants) >= 8 and "direct" in [v.name for v in variants]
    for v in variants:
        got, _ = _run_variant(cl_env, "Convolution", attrs, [x, w], v)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=v.name)



def test_grouped_gemm_with_images_side_by_side_matches_numpy(cl_env):
    """Several images lie side by side along the GEMM's N (conv_gemm.cl): a 5x3
    plane is 15 pixels, so most tiles straddle two or three images, and each of the 2 groups
    is its own GEMM. Every variant, with the residual epilogue, against numpy; an image or a
    group read from the wrong place is off by the size of a whole output."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 12, 5, 3)).astype(np.float32)
    w = (rng.standard_normal((18, 6, 3, 3)) * 0.2).astype(np.float32)
    bias = rng.standard_normal((1, 18, 1, 1)).astype(np.float32)
    residual = rng.standard_normal((3, 18, 5, 3)).astype(np.float32)
    conv = _conv_ref(x, w, pad=1) + bias
    want = np.maximum(np.maximum(conv, 0) + residual, 0)
    epilogue = FusedEpilogue(bias=True, relu=True, residual=True, pre_relu=True)
    op = get_op("GroupConvolution")
    parsed = op.parse_attributes(CONV, "layer")
    w5 = w.reshape(2, 9, 6, 3, 3)
    descs = [TensorDesc(a.shape) for a in (x, w5, bias, residual)]
    out = [TensorDesc(residual.shape)]
    listed = op.kernel_variants(parsed, descs, out, {}, CompileContext(GPU, epilogue=epilogue))
    gemms = [v for v in listed if isinstance(v, GemmVariant)]
    assert len(gemms) >= 4 and all(v.name.startswith("gemm") for v in gemms)
    for v in gemms:
        ctx = CompileContext(GPU, epilogue=epilogue, variant=v)
        launches = op.launches(parsed, descs, out, {}, ctx)
        got = run_launches(cl_env, launches, [x, w5, bias, residual], descs, out,
                           shaped_for=ctx)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=v.name)

def test_depthwise_variants_match_numpy(cl_env):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 8, 13, 10)).astype(np.float32)
    w = (rng.standard_normal((8, 1, 1, 3, 3)) * 0.3).astype(np.float32)
    want = _conv_ref(x, w.reshape(8, 1, 3, 3), pad=1)
    _, variants = _run_variant(cl_env, "GroupConvolution", CONV, [x, w], None)
    assert variants[0].name == "direct" and len(variants) == 5
    for v in variants:
        got, _ = _run_variant(cl_env, "GroupConvolution", CONV, [x, w], v)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=v.name)


def test_non_split_variants_give_identical_bits(cl_env):
    """Tilings sum each output's K terms in one order: only split-K may change the rounding."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((70, 90)).astype(np.float32)
    b = rng.standard_normal((90, 50)).astype(np.float32)
    first, variants = _run_variant(cl_env, "MatMul", {}, [a, b], None)
    same = [v for v in variants if v.ksplit == 1]
    assert len(same) >= 4 and all(v.name.endswith("_k1") for v in same)
    for v in same:
        got, _ = _run_variant(cl_env, "MatMul", {}, [a, b], v)
        assert np.array_equal(got, first), v.name
    np.testing.assert_allclose(first, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_matmul_with_fused_bias_relu_and_residual(cl_env):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((33, 40)).astype(np.float32)
    b = rng.standard_normal((40, 20)).astype(np.float32)
    bias = rng.standard_normal((20,)).astype(np.float32)
    res = rng.standard_normal((33, 20)).astype(np.float32)
    got, _ = _run_variant(cl_env, "MatMul", {}, [a, b, bias, res], None,
                          FusedEpilogue(bias=True, relu=True, residual=True))
    want = np.maximum(a.astype(np.float64) @ b + bias + res, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _matmul_model(path, m=24, k=96, n=40):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(7)
    x = ops.parameter([m, k], np.float32, name="x")
    w = ops.constant((rng.standard_normal((k, n)) * 0.1).astype(np.float32))
    bias = ops.constant(rng.standard_normal((1, n)).astype(np.float32))
    y = ops.relu(ops.add(ops.matmul(x, w, False, False), bias))
    y.output(0).get_tensor().set_names({"y"})
    return save_ov_model(ov.Model([y], [x], "mm"), path / "mm.xml")


def test_tuner_times_once_then_reads_its_choice_from_disk(tmp_path, test_device):
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model = _matmul_model(tmp_path)
    x = np.random.default_rng(8).standard_normal((24, 96)).astype(np.float32)
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    first = Network(model, engine=engine, tuning="full")
    assert first.tuner.stats.layers_timed == 0            # reported, then reset per plan
    # every variant the MatMul lists on this device: 16 GPU tilings, or on a CPU the
    # register-blocked kernels and two tilings
    from customlayers.runtime.device.limits import device_traits
    candidates = 4 if device_traits(engine.device).kind == "CPU" else 16
    note = [m for m in first.messages if m.startswith("tuning (full)")]
    assert note and note[0].startswith(f"tuning (full): 1 layer(s) timed, {candidates} "
                                       f"candidate(s)")
    files = list((tmp_path / "cache" / "tuning").glob("*.json"))
    assert len(files) == 1
    saved = json.loads(files[0].read_text())
    (record,) = saved["choices"].values()
    assert record["type"] == "MatMul" and record["mode"] == "full"
    assert record["variant"] in record["times_us"] and len(record["times_us"]) == candidates
    step = next(s for s in first.plan.steps if s.type.startswith("MatMul"))
    assert step.type == "MatMul+bias+relu"
    chosen = record["variant"]             # gemm64x64_4x4_k1 -> its launch's label part
    label = chosen if chosen.startswith("cpu_") else "gemm" + chosen[4:].split("_k")[0]
    assert step.launches[0].label.startswith(f"matmul_24x96x40_{label}")
    # a second load (fresh process state, the same cache): nothing is timed
    second = Network(model, engine=Engine(test_device, cache=ProgramCache(tmp_path / "cache")),
                     tuning="fast")
    note = [m for m in second.messages if m.startswith("tuning (fast)")]
    assert note == [f"tuning (fast): 0 layer(s) timed, 0 candidate(s), in 0.00 s; 1 choice(s) "
                    f"from the cache ({files[0]})"]
    want = ov_infer(model, {"x": x})["y"]
    for net in (first, second, Network(model, engine=engine, tuning="off")):
        np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_tuning_off_times_nothing_and_unknown_mode_is_refused(tmp_path, test_device):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model = _matmul_model(tmp_path)
    net = Network(model, engine=Engine(test_device), tuning="off")
    assert not [m for m in net.messages if m.startswith("tuning")]
    from customlayers.errors import ConfigError
    with pytest.raises(ConfigError, match="tuning='fastest' is not one of off, fast, full"):
        Network(model, engine=Engine(test_device), tuning="fastest")


def test_custom_layer_with_an_open_local_size_gets_one_by_timing(tmp_path, test_device,
                                                                 examples_dir):
    """The ReLU example leaves local open: the tuner times the driver's choice and work-groups
    that divide the global size; the result is the same whichever wins."""
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.layers.registry import Registry
    x = ops.parameter([2, 8, 16, 32], np.float32, name="x")
    y = ops.relu(ops.multiply(x, ops.constant(np.float32(2.0))))
    y.output(0).get_tensor().set_names({"y"})
    model = save_ov_model(ov.Model([y], [x], "relu"), tmp_path / "relu.xml")
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    reg = Registry(engine)
    reg.load(examples_dir / "relu" / "relu.xml")
    net = Network(model, reg, engine, tuning="full")
    step = next(s for s in net.plan.steps if s.impl == "custom")
    (record,) = json.loads(next((tmp_path / "cache" / "tuning").glob("*.json")).read_text())[
        "choices"].values()
    assert set(record["times_us"]) == {"driver", "local8x8x1", "local8x16x1", "local8x16x2"}
    want_local = None if record["variant"] == "driver" else \
        tuple(int(v) for v in record["variant"][5:].split("x"))
    assert step.launches[0].local_size == want_local
    a = np.random.default_rng(9).standard_normal((2, 8, 16, 32)).astype(np.float32)
    np.testing.assert_array_equal(net.infer({"x": a})["y"], np.maximum(a * 2, 0))


def test_default_mode_comes_from_the_environment(monkeypatch, test_device, tmp_path):
    """CUSTOMLAYERS_TUNING sets the default; an explicit tuning= wins; a value that is not a
    mode is a ConfigError naming the variable."""
    from customlayers.errors import ConfigError
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    from interop_graphs import chain
    engine = Engine(test_device)
    monkeypatch.setenv("CUSTOMLAYERS_TUNING", "full")
    assert Network(chain(), None, engine).tuner.mode == "full"
    assert Network(chain(), None, engine, tuning="off").tuner.mode == "off"
    monkeypatch.delenv("CUSTOMLAYERS_TUNING")
    assert Network(chain(), None, engine).tuner.mode == "fast"
    monkeypatch.setenv("CUSTOMLAYERS_TUNING", "fastest")
    with pytest.raises(ConfigError, match="CUSTOMLAYERS_TUNING='fastest' is not one of off, "
                                          "fast, full"):
        Network(chain(), None, engine)


def test_a_bad_tuning_argument_is_a_config_error_naming_the_argument(test_device, monkeypatch):
    """Network(tuning=...) and Tuner(engine, mode) name the argument and the modes (a
    ConfigError, from settings.py: no caller wraps a ValueError)."""
    from customlayers.errors import ConfigError
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.tuning.tuning import Tuner
    from interop_graphs import chain
    engine = Engine(test_device)
    monkeypatch.delenv("CUSTOMLAYERS_TUNING", raising=False)
    for make in (lambda: Network(chain(), None, engine, tuning="quick"),
                 lambda: Tuner(engine, "quick")):
        with pytest.raises(ConfigError, match=r"tuning='quick' is not one of off, fast, full: "
                                              r"pass one of them"):
            make()


def test_a_bad_tuning_variable_is_one_line_from_the_cli(test_device, monkeypatch, capsys):
    """A setting, not a bug: one `error:` line and exit 1, no traceback."""
    from pathlib import Path
    from customlayers.cli import main as cli_main
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "demo_cnn_builtin.xml"
    monkeypatch.setenv("CUSTOMLAYERS_TUNING", "fastest")
    assert cli_main(["run", "-m", str(model), "-d", "CPU"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: CUSTOMLAYERS_TUNING='fastest' is not one of off, fast, full; ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_fast_times_nothing_on_a_cpu_but_takes_what_full_chose(tmp_path, test_device,
                                                                monkeypatch):
    """On a CPU device `fast` takes the heuristic's kernel (each candidate is a PoCL compile of
    its kernels); `full` times every candidate, and its choice answers `fast` later."""
    from customlayers.jit.launch import DeviceTraits
    from customlayers.runtime.compile import network as network_module
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    model = _matmul_model(tmp_path)
    cpu = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096)
    monkeypatch.setattr(network_module, "device_traits", lambda device: cpu)

    def load(mode):
        return Network(model, engine=Engine(test_device, cache=ProgramCache(tmp_path / "cache")),
                       tuning=mode)
    assert not [m for m in load("fast").messages if m.startswith("tuning")]
    assert [m for m in load("full").messages if m.startswith("tuning (full): 1 layer(s) timed")]
    assert [m for m in load("fast").messages if "1 choice(s) from the cache" in m]


def test_a_changed_builtin_kernel_is_timed_anew(tmp_path, test_device, monkeypatch):
    """The choices' file is keyed by a digest of customlayers/ops/*.cl too: after a built-in
    kernel changes, a choice timed on its old code is not taken."""
    import hashlib
    from pathlib import Path
    import customlayers.ops
    from customlayers.runtime.tuning import tuning_cache
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    digest = hashlib.sha256()
    for path in sorted(Path(customlayers.ops.__file__).parent.glob("*.cl")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    assert tuning_cache.builtin_kernels_digest() == digest.hexdigest()[:16]
    model = _matmul_model(tmp_path)
    cache = tmp_path / "cache"
    Network(model, engine=Engine(test_device, cache=ProgramCache(cache)), tuning="full")
    (saved,) = (cache / "tuning").glob("*.json")
    assert json.loads(saved.read_text())["device"]["kernels"] == digest.hexdigest()[:16]

    def timed_layers() -> str:
        net = Network(model, engine=Engine(test_device, cache=ProgramCache(cache)), tuning="full")
        (note,) = [m for m in net.messages if m.startswith("tuning (full)")]
        return note.split(" layer(s) timed")[0].rsplit(" ", 1)[-1]
    assert timed_layers() == "0"                  # the same kernels: the choice on disk
    monkeypatch.setattr(tuning_cache, "builtin_kernels_digest", lambda: "another")
    assert timed_layers() == "1"                  # changed kernels: timed anew, in a new file
    assert len(list((cache / "tuning").glob("*.json"))) == 2


def test_a_tuning_summary_does_not_name_a_file_it_cannot_keep(tmp_path, test_device, capsys):
    """With the cache folder unwritable (here: a file) the summary named
    '<that file>/tuning/<key>.json' as if the choices were kept there; it now says they are
    not kept (the program cache's one warning says why)."""
    from pathlib import Path
    from customlayers.cli import main as cli_main
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "demo_cnn_builtin.xml"
    blocker = tmp_path / "cache"
    blocker.write_text("a file, not a folder")
    assert cli_main(["run", "-m", str(model), "-d", "CPU", "-cdir", str(blocker),
                     "--tuning", "full"]) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("tuning (full)")]
    assert "not kept" in line, line


def test_the_walk_before_tuning_builds_the_candidates_at_once_and_makes_no_other_work(
        tmp_path, test_device, monkeypatch):
    """Where build workers compile, the tuner walks the layers first (build_ahead) and builds
    every candidate in one batch; the compile after it times them with nothing left to build,
    and the walk makes no layer's work but the candidates' (one work per candidate in the walk,
    one per candidate and the chosen one in the compile). The result is OpenVINO's."""
    from customlayers.ops.base import Op
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.device.limits import device_traits
    import customlayers.runtime.tuning.tuning as tuning
    model = _matmul_model(tmp_path)
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    monkeypatch.setattr(tuning, "worker_count", lambda e: 2)
    batches = []
    real_build = tuning.build_programs

    def build(e, jobs):
        jobs = list(jobs)
        before = e.cache.misses
        out = real_build(e, jobs)
        batches.append(({(j[0], j[1]) for j in jobs}, e.cache.misses - before))
        return out
    monkeypatch.setattr(tuning, "build_programs", build)
    works = []
    real_work = Op.work
    monkeypatch.setattr(Op, "work", lambda self, call, outputs: works.append(call.type) or
                        real_work(self, call, outputs))
    net = Network(model, engine=engine, tuning="full")
    candidates = 4 if device_traits(engine.device).kind == "CPU" else 16
    (walked, built), (timed, rebuilt) = batches
    assert walked == timed and len(walked) == candidates and built == candidates
    assert rebuilt == 0
    assert works.count("MatMul") == 2 * candidates + 1
    x = np.random.default_rng(8).standard_normal((24, 96)).astype(np.float32)
    np.testing.assert_allclose(net.infer({"x": x})["y"], ov_infer(model, {"x": x})["y"],
                               rtol=1e-4, atol=1e-4)


def test_the_walk_before_tuning_sees_each_layer_as_the_compile_does(tmp_path, test_device,
                                                                      monkeypatch):
    """A custom layer whose output is BYXF is reordered to BFYX by its own work: the walk
    (which makes no other work) must hand the layer after it the same BFYX input, or their
    tuning signatures differ and the walk builds candidates the compile never uses."""
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    import customlayers.runtime.tuning.tuning as tuning
    from test_network import _BYXF_KERNEL, _BYXF_LAYER
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    x = ops.parameter([2, 8, 8, 8], np.float32, name="x")
    y = ops.relu(ops.relu(x))
    y.output(0).get_tensor().set_names({"y"})
    model = save_ov_model(ov.Model([y], [x], "chain"), tmp_path / "chain.xml")
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    registry = Registry(engine)
    registry.load_string(_BYXF_LAYER, {"k.cl": _BYXF_KERNEL}, name="byxf.xml")
    monkeypatch.setattr(tuning, "worker_count", lambda e: 2)
    seen = {"walk": [], "compile": []}
    real_signature = tuning.layer_signature
    tuners = []
    real_choose = tuning.Tuner.choose

    def choose(self, impl, call, outputs):
        tuners.append(self)
        return real_choose(self, impl, call, outputs)

    def signature(impl, call, outputs, variants):
        phase = "walk" if tuners[-1]._collected is not None else "compile"
        seen[phase].append((tuple(d.format for d in call.inputs),
                            real_signature(impl, call, outputs, variants)))
        return seen[phase][-1][1]
    monkeypatch.setattr(tuning.Tuner, "choose", choose)
    monkeypatch.setattr(tuning, "layer_signature", signature)
    net = Network(model, registry, engine, tuning="full")
    assert len(seen["walk"]) == 2 and seen["walk"] == seen["compile"]
    assert [formats for formats, _ in seen["walk"]] == [("BFYX",), ("BFYX",)]
    data = np.random.default_rng(4).standard_normal((2, 8, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(net.infer([data])["y"], ov_infer(model, {"x": data})["y"],
                               atol=1e-6)
