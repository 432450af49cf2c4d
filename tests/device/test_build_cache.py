"""Build and cache on a real device: a disk hit proven by a compiler that refuses to run, build
errors at the user's own file and line, kernels that compute the right thing."""
from __future__ import annotations

import json

import numpy as np
import pyopencl as cl
import pytest

from customlayers.config import load_config_string
from customlayers.errors import KernelBuildError
from customlayers.cli.layer_commands.validate import compile_diagnostics
from customlayers.runtime.device.build import map_build_log
from customlayers.runtime.device.device import Engine
from customlayers.runtime.layers.registry import Registry
from customlayers.runtime.device.cache import CacheWarning, ProgramCache
from customlayers.runtime.device.limits import binary_is_wasted, is_pocl_platform
from customlayers.jit.program import generate_program
from customlayers.jit.tensor import TensorDesc

CONFIG = """<CustomLayer name="Affine" type="SimpleGPU" version="1">
  <Kernel entry="affine">
    <Source filename="affine.cl"/>
    <Define name="SCALE" type="float" param="scale" default="1.0f"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="ANY"/>
    <Tensor arg-index="1" type="output" port-index="0" format="BFYX"/>
  </Buffers>
  <WorkSizes global="X,Y,B*F"/>
</CustomLayer>
"""
KERNEL = """__kernel void affine(__global const INPUT0_TYPE* in, __global OUTPUT0_TYPE* out)
{
    const int x = get_global_id(0), y = get_global_id(1), bf = get_global_id(2);
    const int f = bf % INPUT0_DIMS[1], b = bf / INPUT0_DIMS[1];
    const int i = INPUT0_OFFSET + b*INPUT0_PITCHES[0] + f*INPUT0_PITCHES[1]
                + y*INPUT0_PITCHES[2] + x*INPUT0_PITCHES[3];
    const int o = OUTPUT0_OFFSET + b*OUTPUT0_PITCHES[0] + f*OUTPUT0_PITCHES[1]
                + y*OUTPUT0_PITCHES[2] + x*OUTPUT0_PITCHES[3];
    out[o] = SCALE * in[i] + 1.0f;
}
"""


def spec(kernel=KERNEL):
    configs = load_config_string(CONFIG, {"affine.cl": kernel}, name="affine.xml")
    return configs.layers["Affine"]


def compile_check(kernel, inputs, device):
    """validate --compile's diagnostics for the Affine layer with this kernel."""
    configs = load_config_string(CONFIG, {"affine.cl": kernel}, name="affine.xml")
    return compile_diagnostics(Registry(Engine(device), configs), "Affine", list(inputs))


def run(cl_env, program, built, x, in_desc, out_desc):
    ctx, queue, _ = cl_env
    mf = cl.mem_flags
    src = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=in_desc.pack(x))
    dst = cl.Buffer(ctx, mf.WRITE_ONLY, out_desc.nbytes)
    kernel = cl.Kernel(built, program.entry)
    kernel.set_args(src, dst)
    cl.enqueue_nd_range_kernel(queue, kernel, program.global_size, program.local_size)
    host = np.empty(out_desc.buffer_count, out_desc.np_dtype)
    cl.enqueue_copy(queue, host, dst)
    queue.finish()
    return out_desc.unpack(host)


@pytest.mark.parametrize("fmt", ["BFYX", "BYXF", "YXFB", "FYXB"])
def test_generated_program_runs_on_padded_inputs(cl_env, tmp_path, fmt):
    ctx, _, dev = cl_env
    in_desc = TensorDesc((2, 3, 4, 5), format=fmt, lower_pad=(0, 1, 1, 2), upper_pad=(1, 0, 2, 1))
    out_desc = TensorDesc((2, 3, 4, 5))
    program = generate_program(spec(), [in_desc], [out_desc], {"scale": "2.5e-1"})
    built = ProgramCache(tmp_path).build(ctx, dev, program.text, program.options,
                                         line_map=program.line_map, label="Affine")
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(run(cl_env, program, built, x, in_desc, out_desc),
                               0.25 * x + 1.0, rtol=1e-6)


def refuse_source_builds(monkeypatch) -> None:
    """From here on, a program built from source fails the test: only binaries load."""
    real = cl._cl._Program

    def no_source_builds(*args):
        if len(args) == 2:
            raise AssertionError("the compiler was called for a cached program")
        return real(*args)
    monkeypatch.setattr(cl._cl, "_Program", no_source_builds)


def test_second_build_comes_from_disk_without_the_compiler(cl_env, tmp_path, monkeypatch):
    ctx, _, dev = cl_env
    desc = TensorDesc((1, 2, 3, 4))
    program = generate_program(spec(), [desc], [desc], {"scale": "3"})
    first = ProgramCache(tmp_path, binaries=True)     # the binary path, on any device
    first.build(ctx, dev, program.text, program.options, label="Affine")
    assert (first.misses, first.disk_hits, first.hits) == (1, 0, 0)
    first.build(ctx, dev, program.text, program.options, label="Affine")
    assert first.hits == 1                                    # memory hit, same instance

    # From here on, building from source is impossible: only binaries can be loaded.
    refuse_source_builds(monkeypatch)

    fresh = ProgramCache(tmp_path, binaries=True)
    built = fresh.build(ctx, dev, program.text, program.options, label="Affine")
    assert (fresh.misses, fresh.disk_hits) == (0, 1)
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.testing.assert_allclose(run(cl_env, program, built, x, desc, desc), 3 * x + 1)

    # a different source text is a different key, so the compiler is needed again
    other = generate_program(spec(), [desc], [desc], {"scale": "4"})
    with pytest.raises(AssertionError, match="compiler was called"):
        fresh.build(ctx, dev, other.text, other.options)


def test_cache_entry_is_inspectable_and_a_corrupt_one_is_rebuilt(cl_env, tmp_path):
    ctx, _, dev = cl_env
    source = "__kernel void k(__global float* a) { a[0] = 7.0f; }\n"
    cache = ProgramCache(tmp_path, binaries=True)
    cache.build(ctx, dev, source, "-cl-mad-enable", label="k")
    (entry,) = (tmp_path / "programs").iterdir()
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "program.bin", "source.cl"]
    meta = json.loads((entry / "meta.json").read_text())
    assert (meta["options"], meta["device"], meta["key"]) == ("-cl-mad-enable",
                                                             dev.name.strip(), entry.name)
    assert (entry / "source.cl").read_text() == source

    binary = (entry / "program.bin").read_bytes()
    (entry / "program.bin").write_bytes(b"g" * len(binary))     # same size, other bytes
    again = ProgramCache(tmp_path, binaries=True)
    with pytest.warns(CacheWarning, match="does not match the hash"):
        program = again.build(ctx, dev, source, "-cl-mad-enable")
    assert again.misses == 1 and cl.Kernel(program, "k").num_args == 1


def test_disabled_cache_writes_nothing(cl_env, tmp_path):
    ctx, _, dev = cl_env
    cache = ProgramCache(tmp_path, enabled=False)
    cache.build(ctx, dev, "__kernel void k(__global int* a) { a[0] = 1; }\n")
    assert not (tmp_path / "programs").exists()


def test_build_error_points_at_the_users_line(cl_env, tmp_path):
    ctx, _, dev = cl_env
    broken = KERNEL.replace("out[o] = SCALE * in[i] + 1.0f;", "out[o] = SCALE * in[i] + missing;")
    program = generate_program(spec(broken), [TensorDesc((1, 1, 2, 2))],
                               [TensorDesc((1, 1, 2, 2))])
    with pytest.raises(KernelBuildError) as info:
        ProgramCache(tmp_path).build(ctx, dev, program.text, program.options,
                                     line_map=program.line_map, label="Affine")
    e = info.value
    assert e.layer == "Affine"
    assert "affine.cl:9:" in e.log and "missing" in e.log
    assert open(e.source_path).read() == program.text
    assert e.device.startswith(dev.name.strip())
    assert str(e).startswith("layer 'Affine': the OpenCL program does not build\n")


def test_nvidia_style_log_is_mapped_through_the_line_map():
    # NVIDIA accepts `#line 1 "file"` but reports lines of the whole text as <kernel>:L:C
    line_map = (None, None, ("relu.cl", 1), ("relu.cl", 2))
    log = "<kernel>:4:10: error: use of undeclared identifier 'x'\n<kernel>:1:3: warning: w"
    assert map_build_log(log, line_map, "/tmp/gen.cl") == (
        "relu.cl:2:10: error: use of undeclared identifier 'x'\n/tmp/gen.cl:1:3: warning: w")


def test_compile_check_reports_errors_and_argument_counts(cl_env):
    _, _, dev = cl_env
    assert compile_check(KERNEL, [TensorDesc((1, 2, 3, 4))], dev) == []
    broken = KERNEL.replace("const int x", "const int x = nope;\n    const int xx")
    (diag,) = [d for d in compile_check(broken, [], dev) if d.severity == "error"]
    assert (diag.file, diag.line, diag.code, diag.layer) == ("affine.cl", 3, "CL080", "Affine")
    three_args = KERNEL.replace("__global OUTPUT0_TYPE* out)", "__global OUTPUT0_TYPE* out, int n)")
    (diag,) = compile_check(three_args, [], dev)
    assert diag.message == ("layer type 'Affine' (affine.xml:7:5): kernel 'affine' takes 3 "
                            "arguments but the descriptor binds 2 (Tensor and Data arg-index 0, 1)")


def warning_kernel():
    """KERNEL with a compiler warning at affine.cl:3. The code is new on every call: PoCL keeps
    its own binary cache, keyed on the preprocessed text, and a program it finds there comes
    back with the log of the build that stored it (often empty)."""
    import random
    n = random.randrange(10 ** 9)
    return KERNEL.replace("{\n", f"{{\n    int check_padding = {n}.5;\n", 1)


def test_build_warnings_are_mapped_kept_and_pyopencl_stays_quiet(cl_env, tmp_path, capsys):
    import warnings
    ctx, _, dev = cl_env
    program = generate_program(spec(warning_kernel()), [TensorDesc((1, 1, 2, 2))],
                               [TensorDesc((1, 1, 2, 2))])
    cache = ProgramCache(tmp_path, verbose=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built, warned = cache.build_with_warnings(ctx, dev, program.text, program.options,
                                                  line_map=program.line_map, label="Affine")
    assert not [w for w in caught if issubclass(w.category, cl.CompilerWarning)]
    assert "affine.cl:3:" in warned and "implicit conversion" in warned
    assert warned.count("implicit conversion") == 1
    err = capsys.readouterr().err
    assert "compiler warnings of layer 'Affine':" in err and "affine.cl:3:" in err
    assert cl.Kernel(built, "affine").num_args == 2

    # a disk hit (no compiler run, or on PoCL a run its own cache answers) still knows them
    fresh = ProgramCache(tmp_path)
    assert fresh.build_with_warnings(ctx, dev, program.text, program.options)[1] == warned
    assert fresh.disk_hits == 1


def test_compile_check_reports_warnings_at_the_users_line(cl_env):
    _, _, dev = cl_env
    (diag,) = compile_check(warning_kernel(), [TensorDesc((1, 2, 3, 4))], dev)
    assert (diag.file, diag.line, diag.severity, diag.code, diag.layer) == (
        "affine.cl", 3, "warning", "CL082", "Affine")
    assert "implicit conversion from 'double' to 'int'" in diag.message


@pytest.mark.parametrize("meta", ["[]", "null", '"x"', "3", "{not json"])
def test_meta_json_of_any_shape_is_a_warning_and_a_fresh_build(cl_env, tmp_path, meta):
    ctx, _, dev = cl_env
    source = "__kernel void k(__global float* a) { a[0] = 5.0f; }\n"
    ProgramCache(tmp_path, binaries=True).build(ctx, dev, source)
    (entry,) = (tmp_path / "programs").iterdir()
    (entry / "meta.json").write_text(meta)
    again = ProgramCache(tmp_path, binaries=True)
    with pytest.warns(CacheWarning, match="is unusable"):
        program = again.build(ctx, dev, source)
    assert (again.misses, again.disk_hits) == (1, 0)
    assert cl.Kernel(program, "k").num_args == 1
    json.loads((entry / "meta.json").read_text())["binary_sha256"]   # rewritten whole


def test_a_truncated_binary_with_a_rewritten_hash_never_reaches_the_driver(cl_env, tmp_path):
    """Issue 8, class 5: a driver may crash the process on a truncated binary; the cache
    checks the size meta.json recorded before the driver sees it, even when the hash was
    rewritten to match the truncated file."""
    import hashlib
    ctx, _, dev = cl_env
    program = generate_program(spec(), [TensorDesc((1, 1, 2, 2))], [TensorDesc((1, 1, 2, 2))])
    ProgramCache(tmp_path, binaries=True).build(ctx, dev, program.text, program.options)
    (entry,) = (tmp_path / "programs").iterdir()
    half = (entry / "program.bin").read_bytes()[:100]
    (entry / "program.bin").write_bytes(half)
    meta = json.loads((entry / "meta.json").read_text())
    meta["binary_sha256"] = hashlib.sha256(half).hexdigest()
    (entry / "meta.json").write_text(json.dumps(meta))
    again = ProgramCache(tmp_path, binaries=True)
    with pytest.warns(CacheWarning, match=r"program.bin has 100 bytes, meta.json says \d+"):
        built = again.build(ctx, dev, program.text, program.options)
    assert again.misses == 1 and cl.Kernel(built, "affine").num_args == 2


def test_a_killed_writer_leaves_no_temporary_for_long(tmp_path):
    """Issue 8, class 5: the next write of a target removes its stale temporaries."""
    import os
    import time
    from customlayers.files import STALE_AFTER_S, atomic_writer
    target = tmp_path / "program.bin"
    stale = tmp_path / ".program.bin.abc123.tmp"
    fresh = tmp_path / ".program.bin.def456.tmp"     # a live writer's: left alone
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    old = time.time() - STALE_AFTER_S - 5
    os.utime(stale, (old, old))
    with atomic_writer(target) as f:
        f.write(b"whole")
    assert target.read_bytes() == b"whole"
    assert not stale.exists() and fresh.exists()


def test_memory_keeps_the_programs_used_last_and_the_disk_the_rest(cl_env, tmp_path):
    """Issue 22, item 4: the in-memory programs are bounded (a long process kept every program
    it ever built); one dropped from memory comes back from disk, not from the compiler."""
    ctx, _, dev = cl_env
    cache = ProgramCache(tmp_path, memory_entries=2)
    sources = [f"__kernel void k(__global float* x) {{ x[0] = {i}.0f; }}" for i in range(3)]
    for text in sources:
        cache.build(ctx, dev, text)
    cache.build(ctx, dev, sources[2])          # used last: in memory
    cache.build(ctx, dev, sources[1])          # in memory too (the bound is two)
    assert (cache.misses, cache.hits, cache.disk_hits) == (3, 2, 0)
    cache.build(ctx, dev, sources[0])          # the least recently used: dropped from memory
    assert (cache.misses, cache.hits, cache.disk_hits) == (3, 2, 1)


class _SlowStream:
    """A stderr whose every write call is kept apart and takes a while, as a terminal or a pipe
    may: another thread's write then lands between two writes of one line, if a line is
    written in more than one."""

    def __init__(self):
        import threading
        self.writes: list[tuple[str, str]] = []
        self._threading = threading

    def write(self, text: str) -> int:
        import time
        self.writes.append((self._threading.current_thread().name, text))
        time.sleep(0.005)
        return len(text)

    def flush(self) -> None:
        pass


def test_verbose_reports_of_parallel_builds_are_whole_lines(tmp_path, monkeypatch):
    """CUSTOMLAYERS_VERBOSE=1 with a network whose programs build in parallel threads
    (parallel_build.py): every line on stderr is one whole report line."""
    import re
    # here, not in build worker processes (NVIDIA's default): the threads' lines are the test
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    import sys
    from onnx import TensorProto, helper, save
    from customlayers.api import Network
    ops = ["Relu", "Sigmoid", "Tanh", "Exp", "Softsign", "Neg", "Abs", "Softplus"]
    nodes = [helper.make_node(op, [f"t{i}"], [f"t{i + 1}"]) for i, op in enumerate(ops)]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info(f"t{len(ops)}", TensorProto.FLOAT, [2, 8])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
         tmp_path / "chain.onnx")
    monkeypatch.setenv("CUSTOMLAYERS_VERBOSE", "1")
    stream = _SlowStream()
    monkeypatch.setattr(sys, "stderr", stream)
    engine = Engine(cache=ProgramCache(tmp_path / "cache"))
    net = Network(tmp_path / "chain.onnx", engine=engine, tuning="off", fuse=False)
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8)
    net.infer({"t0": x})
    monkeypatch.undo()
    report = re.compile(r"customlayers: program cache (memory hit|disk hit|miss, built)"
                        r"( in \d+\.\d ms)?:( .+)? \[[0-9a-f]{12}\]")
    text = "".join(t for _, t in stream.writes)
    lines = text.splitlines()
    assert text.endswith("\n") and lines, text
    assert [line for line in lines if not report.fullmatch(line)] == [], text
    builders = {name for name, t in stream.writes if "miss, built" in t}
    assert len(builders) > 1, f"the builds ran on one thread ({builders})"


def test_where_the_driver_keeps_programs_the_entry_holds_no_binary(cl_env, tmp_path,
                                                                   monkeypatch):
    """Stop 27: asking a PoCL that specializes its work-groups for a program's binary compiles
    every kernel of it once more, for a work-group size no launch uses (3-5 s of a convolution
    program's cold cost). Where the cache keeps no binary, an entry holds the source and
    meta.json only, and a new process builds the text again, which the driver's cache
    answers: a disk hit that runs."""
    ctx, _, dev = cl_env
    desc = TensorDesc((1, 2, 3, 4))
    program = generate_program(spec(), [desc], [desc], {"scale": "5"})
    first = ProgramCache(tmp_path, binaries=False)
    first.build(ctx, dev, program.text, program.options, label="Affine")
    (entry,) = (tmp_path / "programs").iterdir()
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "source.cl"]
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["kept_by_driver"] is True and "binary_sha256" not in meta
    assert first.has(ctx, dev, program.text, program.options)

    fresh = ProgramCache(tmp_path, binaries=False)
    built = fresh.build(ctx, dev, program.text, program.options, label="Affine")
    assert (fresh.misses, fresh.disk_hits) == (0, 1)
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.testing.assert_allclose(run(cl_env, program, built, x, desc, desc), 5 * x + 1)
    # a cache that keeps binaries reads the same entry (the key is the same) and gives it
    # one, once: the next process loads the binary, the compiler never called
    both = ProgramCache(tmp_path, binaries=True)
    both.build(ctx, dev, program.text, program.options)
    assert (both.misses, both.disk_hits) == (0, 1)
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "program.bin", "source.cl"]
    assert "kept_by_driver" not in json.loads((entry / "meta.json").read_text())
    refuse_source_builds(monkeypatch)
    last = ProgramCache(tmp_path, binaries=True)
    built = last.build(ctx, dev, program.text, program.options)
    assert (last.misses, last.disk_hits) == (0, 1)
    np.testing.assert_allclose(run(cl_env, program, built, x, desc, desc), 5 * x + 1)


def test_the_default_keeps_a_binary_unless_pocl_specializes_its_work_groups(cl_env, tmp_path,
                                                                           monkeypatch):
    """Stop 28: a PoCL that runs one work-group function for every size (what an Engine sets,
    and conftest) gets binaries kept like any driver; one that specializes (the user set
    POCL_WORK_GROUP_SPECIALIZATION=1) with its own cache on gets source-only entries."""
    ctx, _, dev = cl_env
    pocl = is_pocl_platform(dev)
    kernel = "__kernel void k(__global float* a) { a[0] = 3.0f; }\n"
    assert binary_is_wasted(dev) is False
    ProgramCache(tmp_path / "generic").build(ctx, dev, kernel)
    (entry,) = (tmp_path / "generic" / "programs").iterdir()
    assert (entry / "program.bin").exists()
    monkeypatch.setenv("POCL_WORK_GROUP_SPECIALIZATION", "1")
    assert binary_is_wasted(dev) is pocl
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")        # PoCL's own cache off: keep binaries
    assert binary_is_wasted(dev) is False
    monkeypatch.delenv("POCL_KERNEL_CACHE")
    cache = ProgramCache(tmp_path / "specialized")
    cache.build(ctx, dev, kernel)
    (entry,) = (tmp_path / "specialized" / "programs").iterdir()
    assert (entry / "program.bin").exists() is not pocl
    monkeypatch.setenv("CUSTOMLAYERS_KEEP_BINARIES", "1")     # the user's choice, any device
    assert ProgramCache(tmp_path).keeps_binary(dev) is True
    monkeypatch.setenv("CUSTOMLAYERS_KEEP_BINARIES", "0")
    assert ProgramCache(tmp_path).keeps_binary(dev) is False
    assert ProgramCache(tmp_path, binaries=True).keeps_binary(dev) is True   # the argument


def test_a_driver_kept_entry_that_no_longer_builds_raises_the_build_error_once(
        cl_env, tmp_path, monkeypatch):
    """(review) An entry without a binary whose source the compiler now refuses: the
    KernelBuildError itself, compiled once, not a CacheWarning and a second compile."""
    import warnings
    from customlayers.runtime.device import cache as cache_module
    from customlayers.runtime.device.cache import cache_key
    ctx, _, dev = cl_env
    bad = "__kernel void k(__global float* a) { this is not C; }\n"
    entry = tmp_path / "programs" / cache_key(bad, "", dev)
    entry.mkdir(parents=True)
    (entry / "source.cl").write_text(bad)
    (entry / "meta.json").write_text(json.dumps({"kept_by_driver": True, "warnings": ""}))
    calls = []
    real = cache_module.compile_source

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(cache_module, "compile_source", counted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KernelBuildError):
            ProgramCache(tmp_path, binaries=False).build(ctx, dev, bad, label="k")
    assert len(calls) == 1
    assert not [w for w in caught if issubclass(w.category, CacheWarning)]
