"""Compiled packages (customlayers compile -o model.clpkg; Network("model.clpkg")) through the
CLI and the API on the test device: the outputs equal the unpackaged network's bit for bit; a
fresh process with an empty cache builds and tunes nothing; no kernel source, descriptor or
Python code is in the file unless --keep-sources; every bad package (a flipped byte, a
truncated file, another device or version, shapes it was not compiled for, a Python layer not
loaded) is a PackageError naming what fails."""
from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from customlayers.api import Engine, Registry
from customlayers.cli import main as cli_main
from customlayers.errors import PackageError
from customlayers.runtime.compile.network import Network
from customlayers.runtime.compile.packaged import save_package
from customlayers.runtime.package.container import read_package
from python_layer_texts import SOFTSIGN

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "models" / "demo_cnn.xml"          # GRN and ReorgYolo: SimpleGPU
CONFIGS = [ROOT / "examples" / "layers" / "grn" / "grn.xml",
           ROOT / "examples" / "layers" / "reorg" / "reorg.xml"]
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it


def demo_input(seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


@pytest.fixture(scope="module")
def demo(engine):
    registry = Registry(engine)
    registry.load(*CONFIGS)
    net = Network(str(DEMO), registry, engine)
    return net, net.infer({"data": demo_input()})


@pytest.fixture(scope="module")
def packages(tmp_path_factory, demo):
    """The demo model packaged without and with its sources."""
    folder = tmp_path_factory.mktemp("packages")
    net, _ = demo
    plain, kept = folder / "demo.clpkg", folder / "demo_sources.clpkg"
    save_package(net, plain, model=str(DEMO))
    save_package(net, kept, keep_sources=True, model=str(DEMO))
    return plain, kept


def manifest_of(path: Path) -> dict:
    data = path.read_bytes()
    size = struct.unpack_from("<Q", data, 12)[0]
    return json.loads(data[20:20 + size])


def resign(path: Path, out: Path, edit) -> Path:
    """A copy of the package whose manifest `edit` changed, with the manifest's hash made
    anew (what a tamperer, or another machine, would write)."""
    data = path.read_bytes()
    size = struct.unpack_from("<Q", data, 12)[0]
    manifest = json.loads(data[20:20 + size])
    edit(manifest)
    text = json.dumps(manifest).encode()
    out.write_bytes(data[:12] + struct.pack("<Q", len(text)) + text +
                    hashlib.sha256(text).digest() + data[20 + size + 32:])
    return out


FRESH = textwrap.dedent('''
    import json, sys, numpy as np
    from customlayers.api import Engine
    from customlayers.runtime.compile.network import Network
    engine = Engine(sys.argv[2])
    net = Network(sys.argv[1], engine=engine)
    out = net.infer({"data": np.load(sys.argv[3])})
    np.savez(sys.argv[4], **out)
    cache = engine.cache
    print(json.dumps({"hits": cache.hits, "disk_hits": cache.disk_hits,
                      "misses": cache.misses}))
''')


def test_a_fresh_process_with_an_empty_cache_loads_it_and_builds_nothing(tmp_path, demo,
                                                                          packages):
    _, expected = demo
    np.save(tmp_path / "x.npy", demo_input())
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    env = {**os.environ, "CUSTOMLAYERS_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", FRESH, str(packages[0]), TEST_DEVICE,
                           str(tmp_path / "x.npy"), str(tmp_path / "out.npz")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"hits": 0, "disk_hits": 0, "misses": 0}
    assert not any(cache.rglob("*"))            # nothing built, tuned or cached
    got = np.load(tmp_path / "out.npz")
    assert set(got.files) == set(expected)
    for name, value in expected.items():
        assert got[name].dtype == value.dtype and np.array_equal(got[name], value)


def test_the_cli_compiles_runs_benchmarks_and_inspects_a_package(tmp_path, demo, capsys):
    _, expected = demo
    pkg = tmp_path / "new" / "demo.clpkg"            # its folder made, as run -o makes one
    configs = [str(c) for c in CONFIGS]
    assert cli_main(["compile", "-m", str(DEMO), "-c", *configs, "-d", TEST_DEVICE,
                     "-o", str(pkg)]) == 0
    assert "compiled 6 layers for data=[1, 3, 32, 32]" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", demo_input())
    assert cli_main(["run", "-m", str(pkg), "-d", TEST_DEVICE, "-i", str(tmp_path / "x.npy"),
                     "-o", str(tmp_path / "y.npz")]) == 0
    got = np.load(tmp_path / "y.npz")
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    assert cli_main(["benchmark", "-m", str(pkg), "-d", TEST_DEVICE, "-niter", "3"]) == 0
    assert "throughput" in capsys.readouterr().out
    assert cli_main(["inspect", str(pkg)]) == 0
    shown = capsys.readouterr().out
    for text in ("format 1", "input shapes: data=[1, 3, 32, 32]", "grn    GRN (custom, 1 kernel)",
                 "sources kept: no", "device: "):
        assert text in shown
    assert cli_main(["compile", "-m", str(DEMO), "-c", *configs, "-o",
                     str(tmp_path / "demo.bin")]) == 2
    assert "a package's name ends with .clpkg" in capsys.readouterr().err
    # a package takes no configs: it holds its kernels
    assert cli_main(["run", "-m", str(pkg), "-d", TEST_DEVICE, "-c", configs[0]]) == 2
    assert "give no -c" in capsys.readouterr().err


def _source_lines(net) -> list[str]:
    """A distinctive line of every program the network runs (custom and built-in)."""
    lines = []
    for step in net.plan.steps:
        for launch in step.launches:
            body = [ln.strip() for ln in launch.source.splitlines()
                    if len(ln.strip()) > 30 and not ln.strip().startswith(("#", "//"))]
            lines.append(max(body, key=len))
    return lines


def test_no_source_or_descriptor_text_is_in_it_unless_kept(demo, packages):
    net, _ = demo
    plain, kept = (p.read_bytes() for p in packages)
    lines = _source_lines(net)
    assert len(lines) >= 4          # the demo's layers (how many launches: the device's plan)
    for line in lines:
        assert line.encode() not in plain
    grn = (ROOT / "examples" / "layers" / "grn" / "grn.cl").read_text()
    assert max(grn.splitlines(), key=len).strip().encode() not in plain
    assert b"CustomLayer" not in plain and b"<Kernel" not in plain
    assert all(line.encode() in kept for line in lines)


def test_a_flipped_byte_in_each_part_is_refused_naming_it(tmp_path, packages, engine):
    data = packages[0].read_bytes()
    manifest = read_package(packages[0]).manifest
    base = len(data) - sum(p["size"] for p in manifest["parts"])
    spots = [(5, "header"), (40, "manifest")] + \
        [(base + p["offset"] + p["size"] // 2, p["name"]) for p in manifest["parts"]]
    bad = tmp_path / "bad.clpkg"
    for offset, part in spots:
        flipped = bytearray(data)
        flipped[offset] ^= 0x40
        bad.write_bytes(bytes(flipped))
        with pytest.raises(PackageError) as e:
            Network(str(bad), engine=engine)
        assert e.value.part == part, (offset, str(e.value))
    for size in (len(data) // 3, len(data) - 1):
        bad.write_bytes(data[:size])
        with pytest.raises(PackageError, match="truncated"):
            Network(str(bad), engine=engine)


def test_the_cli_refuses_a_corrupted_package_in_one_line(tmp_path, packages, capsys):
    data = bytearray(packages[0].read_bytes())
    parts = read_package(packages[0]).manifest["parts"]
    program = next(p for p in parts if p["name"].startswith("program "))
    data[len(data) - sum(p["size"] for p in parts) + program["offset"] + 10] ^= 1
    bad = tmp_path / "bad.clpkg"
    bad.write_bytes(bytes(data))
    assert cli_main(["run", "-m", str(bad), "-d", TEST_DEVICE]) == 1
    err = capsys.readouterr().err
    assert "is corrupted: part 'program " in err and "fails its checksum" in err
    assert "Traceback" not in err


def test_compile_of_a_package_is_refused_before_any_note(tmp_path, packages, capsys):
    """A package holds plans, not the graph compile reads: one error that says what to give,
    and no note that an option "applies to compile" before it."""
    args = ["compile", "-m", str(packages[0]), "-o", str(tmp_path / "again.clpkg"),
            "--fuse-temporal-blocks", "-d", TEST_DEVICE]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "a compiled package already" in err and "the model it was made from" in err
    assert "note:" not in err and "Traceback" not in err
    assert not (tmp_path / "again.clpkg").exists()
    # a name that only looks like a package: the missing file is what is said
    missing = ["compile", "-m", str(tmp_path / "nowhere.clpkg"), "-o",
               str(tmp_path / "again.clpkg"), "-d", TEST_DEVICE]
    assert cli_main(missing) == 2                  # a missing input file, as for a model
    err = capsys.readouterr().err
    assert "nowhere.clpkg" in err and "a compiled package already" not in err
    assert "Traceback" not in err
    assert cli_main(["run", "-m", str(tmp_path / "nowhere.clpkg"), "-d", TEST_DEVICE]) == 2
    assert "cannot read the package" in capsys.readouterr().err


def test_another_device_without_sources_is_refused_naming_both(tmp_path, packages, engine):
    def fake_device(m):
        m["device"]["name"] = "Imaginary GPU 9000"
        m["device"]["driver"] = "1.0-fake"
    other = resign(packages[0], tmp_path / "other.clpkg", fake_device)
    with pytest.raises(PackageError) as e:
        Network(str(other), engine=engine)
    text = str(e.value)
    assert "was built for Imaginary GPU 9000 (driver 1.0-fake" in text
    assert f"this is {engine.device.name.strip()}" in text
    assert "customlayers compile -m MODEL -d DEVICE" in text and e.value.part == "device"

    def fake_version(m):
        m["customlayers_version"] = "99.0"
    newer = resign(packages[0], tmp_path / "newer.clpkg", fake_version)
    with pytest.raises(PackageError, match=r"customlayers 99.0 \(this one: "):
        Network(str(newer), engine=engine)


def test_another_device_with_sources_rebuilds_with_a_notice(tmp_path, demo, packages,
                                                           test_device):
    _, expected = demo
    def fake_device(m):
        m["device"]["name"] = "Imaginary GPU 9000"
    other = resign(packages[1], tmp_path / "other.clpkg", fake_device)
    said = []
    fresh = Engine(test_device)
    net = Network(str(other), engine=fresh, messages=said.append)
    # as many as the package holds (7 on PoCL, where the convolutions' zero-padded copy is a
    # program of its own: conv_cpu_pad.cl)
    count = len(manifest_of(other)["programs"])
    assert len(said) == 1 and f"rebuilding its {count} programs from the sources it keeps" \
        in said[0]
    assert fresh.cache.misses + fresh.cache.disk_hits == count
    got = net.infer({"data": demo_input()})
    assert all(np.array_equal(got[n], v) for n, v in expected.items())


def test_shapes_it_was_not_compiled_for_are_refused_naming_its_own(packages, engine):
    net = Network(str(packages[0]), engine=engine)
    assert net.input_names == ["data"] and net.output_names == ["prob/sink"]
    with pytest.raises(PackageError) as e:
        net.infer({"data": np.zeros((1, 3, 64, 64), np.float32)})
    assert "compiled for input shapes data=[1, 3, 32, 32]; these are data=[1, 3, 64, 64]" in \
        str(e.value)
    assert "--shape data=1x3x64x64" in str(e.value)
    with pytest.raises(PackageError, match="compiled for input shapes data=.1, 3, 32, 32.; "):
        Network(str(packages[0]), engine=engine, input_shapes={"data": (2, 3, 32, 32)})
    same = Network(str(packages[0]), engine=engine, input_shapes={"data": (1, 3, 32, 32)})
    assert same.plan.inputs == net.plan.inputs


def test_requests_and_streams_of_a_package_equal_the_network(demo, packages, engine):
    _, expected = demo
    net = Network(str(packages[0]), engine=engine)
    req = net.create_request()
    assert all(np.array_equal(req.infer({"data": demo_input()})[n], v)
               for n, v in expected.items())
    streamed = list(net.stream([demo_input(), demo_input()], nireq=2))
    assert all(np.array_equal(s[n], v) for s in streamed for n, v in expected.items())


def test_a_python_layer_is_recorded_and_needs_its_file_to_load(tmp_path, engine):
    from test_python_layers import chain_model, rand
    layers = tmp_path / "my_layers.py"
    layers.write_text(textwrap.dedent(SOFTSIGN))
    registry = Registry(engine)
    assert not list(registry.load_python(layers))
    model = chain_model(tmp_path / "m.onnx", "Softsign", alpha=0.5)
    net = Network(str(model), registry, engine)
    x = rand()
    expected = net.infer({"x": x})["y"]
    pkg = tmp_path / "m.clpkg"
    manifest = save_package(net, pkg)
    assert manifest["python_layers"] == [["Softsign", "Softsign", "my_layers.py"]]
    assert b"np.divide" not in pkg.read_bytes() and b"cpu_layer" not in pkg.read_bytes()
    with pytest.raises(PackageError) as e:
        Network(str(pkg), engine=engine)
    assert "type Softsign (class Softsign of my_layers.py" in str(e.value)
    assert "-l my_layers.py" in str(e.value)
    got = Network(str(pkg), registry, engine).infer({"x": x})["y"]
    assert np.array_equal(got, expected)
    # the CLI: -l names the file
    np.save(tmp_path / "x.npy", x)
    assert cli_main(["run", "-m", str(pkg), "-d", TEST_DEVICE, "-l", str(layers), "-i",
                     str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "y.npy"), expected)


def test_a_stateful_model_carries_its_state_as_the_network_does(tmp_path, engine):
    pytest.importorskip("openvino")          # the model is written with OpenVINO's API
    from stateful_models import running_sum
    model = running_sum(tmp_path / "sum.xml", "opset6-input")
    net = Network(model, engine=engine)
    pkg = tmp_path / "sum.clpkg"
    save_package(net, pkg)
    loaded = Network(str(pkg), engine=engine)
    xs = np.random.default_rng(4).standard_normal((3, 2, 4)).astype(np.float32)
    reqs = [n.create_request() for n in (net, loaded)]
    for x in xs:
        a, b = (r.infer({"x": x})["y"] for r in reqs)
        assert np.array_equal(a, b)
    states = [r.query_state() for r in reqs]
    assert [s.name for s in states[1]] == [s.name for s in states[0]] == ["acc"]
    assert np.array_equal(states[1][0].state, states[0][0].state)
    # the CLI runs the package's sequence as it runs the model's
    np.save(tmp_path / "seq.npy", xs)
    for source, out in ((model, "a.npz"), (str(pkg), "b.npz")):
        assert cli_main(["run", "-m", source, "-d", TEST_DEVICE, "--stream", "-i",
                         f"x={tmp_path / 'seq.npy'}", "-o", str(tmp_path / out)]) == 0
    assert np.array_equal(np.load(tmp_path / "a.npz")["y"], np.load(tmp_path / "b.npz")["y"])


def test_a_light_onnx_model_equals_the_network_bit_for_bit(tmp_path, engine):
    from models import light_onnx
    net = Network(str(light_onnx("squeezenet")), engine=engine, tuning="off")
    name = net.input_names[0]
    x = np.random.default_rng(1).standard_normal(net.plan.descs[net.plan.inputs[0][1]].shape
                                                  ).astype(np.float32)
    expected = net.infer({name: x})
    pkg = tmp_path / "squeezenet.clpkg"
    save_package(net, pkg)
    # the weights once: not the model's, its folded copy and the packed one side by side
    import onnx
    weights = sum(onnx.numpy_helper.to_array(t).nbytes
                  for t in onnx.load(str(light_onnx("squeezenet"))).graph.initializer)
    arrays = next(p["size"] for p in read_package(pkg).manifest["parts"]
                  if p["name"] == "arrays")
    assert arrays < 1.2 * weights, (arrays, weights)
    fresh = Engine(engine.device)
    got = Network(str(pkg), engine=fresh).infer({name: x})
    assert fresh.cache.misses == fresh.cache.hits == fresh.cache.disk_hits == 0
    assert all(np.array_equal(got[n], v) for n, v in expected.items())


def test_an_mvcl_layer_in_a_package_equals_the_network(tmp_path, engine):
    from customlayers.cli.model_commands.demo import case_arrays, find_examples, layer_type_of
    from model_files import write_ir
    example = next(e for e in find_examples() if e.kind == "MVCL")
    registry = Registry(engine)
    registry.load(example.config)
    layer = layer_type_of(registry, example)
    case = example.reference.CASES[0]
    inputs, _ = case_arrays(case, seed=5)
    params = dict(case.get("params", {}))
    expected = example.reference.reference(inputs, params, {})
    path = write_ir(tmp_path / "m.xml", layer, inputs, expected, params)
    net = Network(path, registry, engine)
    feed = {f"x{i}": a for i, a in enumerate(inputs)}
    want = net.infer(feed)
    pkg = tmp_path / "mvcl.clpkg"
    save_package(net, pkg)
    assert b"__kernel" not in pkg.read_bytes()
    got = Network(str(pkg), engine=Engine(engine.device)).infer(feed)
    assert all(np.array_equal(got[n], v) for n, v in want.items())


def test_the_ray_setup_builds_the_network_of_a_package(demo, packages):
    from customlayers.integrations.network_setup import build_network
    _, expected = demo
    net = build_network(packages[0], device=TEST_DEVICE)
    got = net.infer({"data": demo_input()})
    assert net.package is not None
    assert all(np.array_equal(got[n], v) for n, v in expected.items())


def test_compile_takes_several_shape_sets_into_one_package(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "dyn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    model = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    pkg = tmp_path / "dyn.clpkg"
    assert cli_main(["compile", "-m", str(model), "-d", TEST_DEVICE, "--shape", "x=1x4",
                     "--shape", "x=3x4", "-o", str(pkg)]) == 0
    out = capsys.readouterr().out
    assert "for x=[1, 4]; x=[3, 4]" in out
    counts = out.split("compiled ")[1].split(" layers")[0]     # each plan's own count
    assert len(counts.split(" / ")) == 2, out
    assert cli_main(["inspect", str(pkg)]) == 0
    shown = capsys.readouterr().out
    assert "dynamic inputs as declared: x=[?, 4]" in shown
    assert "layers of the plan for x=[1, 4] (" in shown and f"per plan: {counts})" in shown
    net = Network(str(pkg), engine=Engine(TEST_DEVICE))
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        assert np.array_equal(net.infer({"x": x})["y"], -np.maximum(x, 0))
    with pytest.raises(PackageError, match=r"compiled for input shapes x=\[1, 4\]; x=\[3, 4\]"):
        net.infer({"x": np.zeros((2, 4), np.float32)})


def repack(path: Path, out: Path, part: str, data: bytes) -> Path:
    """A copy of the package with `part` replaced and every hash made anew (an edit whose
    author also rewrote the checksums)."""
    from customlayers.runtime.package.container import write_package
    pkg = read_package(path)
    manifest = {k: v for k, v in pkg.manifest.items() if k not in ("parts", "format_version")}
    write_package(out, manifest, [(p["name"], data if p["name"] == part else
                                   bytes(pkg.parts[p["name"]])) for p in pkg.manifest["parts"]])
    return out


@pytest.mark.parametrize("part, data", [
    ("graph", b'{"$d": []}'), ("graph", b'[1, 2]'), ("plans", b"[]"), ("plans", b'[{"$d": []}]'),
    ("plans", b'[{"$c": "Popen", "f": {}}]'), ("plans", b'{"not": "a list"}'),
    ("plans", b"[" * 100000 + b"]" * 100000),
], ids=["graph-empty", "graph-list", "no-plan", "plan-empty", "plan-class", "plans-dict",
        "deep"])
def test_a_re_signed_malformed_part_is_refused_naming_it(tmp_path, packages, engine, part,
                                                         data):
    bad = repack(packages[0], tmp_path / "bad.clpkg", part, data)
    with pytest.raises(PackageError) as e:
        Network(str(bad), engine=engine)
    assert e.value.part == part and f"part '{part}' is malformed" in str(e.value)


def test_a_re_signed_plan_with_a_step_of_wrong_types_is_refused(tmp_path, packages, engine):
    plans = bytes(read_package(packages[0]).parts["plans"])
    broken = plans.replace(b'"global_size":{"$t":[', b'"global_size":{"$t":["x",', 1)
    assert broken != plans
    bad = repack(packages[0], tmp_path / "bad.clpkg", "plans", broken)
    with pytest.raises(PackageError, match="is not a plan step") as e:
        Network(str(bad), engine=engine)
    assert e.value.part == "plans"
