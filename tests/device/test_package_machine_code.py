"""A package's NVIDIA machine code (runtime/package/machine_code.py): captured at compile on an
NVIDIA device, put into the driver's cache folder at load, before the binaries reach the driver,
so that a fresh machine compiles nothing. On PoCL a package has none of its own; parts of that
form are added here to check the load's side (what is written where, what is refused)."""
from __future__ import annotations

import json
import os
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
from customlayers.runtime.package.container import read_package, write_package
from customlayers.runtime.package.machine_code import (PART_PREFIX, capture_in_child,
                                                       has_driver_cache)

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "models" / "demo_cnn.xml"
CONFIGS = [ROOT / "examples" / "layers" / "grn" / "grn.xml",
           ROOT / "examples" / "layers" / "reorg" / "reorg.xml"]
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


@pytest.fixture(scope="module")
def demo(engine, tmp_path_factory):
    """The demo network, its output, and its package."""
    registry = Registry(engine)
    registry.load(*CONFIGS)
    net = Network(str(DEMO), registry, engine)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    pkg = tmp_path_factory.mktemp("machine-code") / "demo.clpkg"
    save_package(net, pkg, model=str(DEMO))
    return x, net.infer({"data": x}), pkg


def code_parts(pkg: Path) -> dict[str, bytes]:
    found = read_package(pkg)
    return {name[len(PART_PREFIX):]: bytes(data) for name, data in found.parts.items()
            if name.startswith(PART_PREFIX)}


def with_parts(pkg: Path, out: Path, extra: dict[str, bytes]) -> Path:
    """A copy of the package with `extra` parts ({name: bytes}) added, every hash made anew."""
    found = read_package(pkg)
    manifest = {k: v for k, v in found.manifest.items() if k not in ("parts", "format_version")}
    parts = [(p["name"], bytes(found.parts[p["name"]])) for p in found.manifest["parts"]]
    write_package(out, manifest, parts + list(extra.items()))
    return out


LOAD = textwrap.dedent('''
    import os, sys, numpy as np
    from customlayers.api import Engine
    from customlayers.runtime.compile.network import Network
    said = []
    engine = Engine(sys.argv[2])
    if len(sys.argv) > 5:      # too late: the driver read CUDA_CACHE_PATH when OpenCL started
        os.environ["CUDA_CACHE_PATH"] = sys.argv[5]
    net = Network(sys.argv[1], engine=engine, messages=said.append)
    np.savez(sys.argv[4], **net.infer({"data": np.load(sys.argv[3])}))
    print("\\n".join(said))
''')


def load_fresh(tmp_path, pkg, x, later: str = "", **env) -> tuple[dict, str]:
    """Load `pkg` in a new process (its own driver, as on a fresh machine) with `env` added:
    (its outputs, what it said). `later`: a CUDA_CACHE_PATH set after the Engine was made."""
    np.save(tmp_path / "x.npy", x)
    full = {**os.environ, "PYTHONPATH": str(ROOT),
            "CUSTOMLAYERS_CACHE_DIR": str(tmp_path / "our-cache"), **env}
    for name in ("CUDA_CACHE_DISABLE", "CUSTOMLAYERS_NO_MACHINE_CODE"):
        if name not in env:
            full.pop(name, None)
    done = subprocess.run([sys.executable, "-c", LOAD, str(pkg), TEST_DEVICE,
                           str(tmp_path / "x.npy"), str(tmp_path / "out.npz"),
                           *([later] if later else [])],
                          capture_output=True, text=True, env=full, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    out = np.load(tmp_path / "out.npz")
    return {n: out[n] for n in out.files}, done.stdout


def files_in(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*") if p.is_file() and p.name != "index"}


def test_nvidias_platform_is_told_from_others(engine):
    platform = engine.device.platform
    assert has_driver_cache(engine.device) == (platform.name.strip() == "NVIDIA CUDA"), \
        (platform.name, platform.vendor)


def test_a_package_holds_machine_code_where_the_driver_compiles_ptx(demo, engine):
    _, _, pkg = demo
    manifest, code = read_package(pkg).manifest, code_parts(pkg)
    if has_driver_cache(engine.device):
        assert code and manifest["machine_code"] == {
            "files": len(code), "size": sum(len(d) for d in code.values())}
    else:                                  # PoCL: its binaries are its machine code already
        assert not code and manifest["machine_code"] is None


@pytest.mark.skipif(not TEST_DEVICE.upper().startswith("GPU"), reason="NVIDIA's driver only")
def test_on_nvidia_a_fresh_machine_finds_all_its_code_in_the_package(demo, engine, tmp_path):
    if not has_driver_cache(engine.device):
        pytest.skip("not an NVIDIA device")
    x, expected, pkg = demo
    cache = tmp_path / "empty-driver-cache"
    got, said = load_fresh(tmp_path, pkg, x, CUDA_CACHE_PATH=str(cache))
    assert all(np.array_equal(got[n], v) for n, v in expected.items()) and not said.strip()
    # the driver found every program's code: it compiled nothing, so wrote no file of its own
    assert files_in(cache) == code_parts(pkg)


def test_a_load_puts_the_code_into_cuda_cache_path_first(demo, engine, tmp_path):
    """On NVIDIA's platform; elsewhere (PoCL) nothing is written, whatever the package says."""
    x, expected, pkg = demo
    extra = {PART_PREFIX + "0/a/0123456789abcd": b"code one",
             PART_PREFIX + "f/3/fedcba98765432": b"code two"}
    added = with_parts(pkg, tmp_path / "with-code.clpkg", extra)
    cache = tmp_path / "driver-cache"
    got, _ = load_fresh(tmp_path, added, x, CUDA_CACHE_PATH=str(cache))
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    if not has_driver_cache(engine.device):
        assert not cache.exists()
        return
    found = files_in(cache)
    assert found["0/a/0123456789abcd"] == b"code one"
    assert found["f/3/fedcba98765432"] == b"code two"
    # (a file already there is kept: tests/unit/test_machine_code.py; NVIDIA's driver manages
    # its folder itself, so a file planted here beside its index proves nothing on it)


def test_the_folder_is_the_one_named_when_opencl_started(demo, engine, tmp_path):
    if not has_driver_cache(engine.device):
        pytest.skip("NVIDIA's platform only: elsewhere nothing is written")
    x, expected, pkg = demo
    added = with_parts(pkg, tmp_path / "with-code.clpkg", {PART_PREFIX + "0/a/01": b"code"})
    first, later = tmp_path / "at-start", tmp_path / "set-later"
    got, _ = load_fresh(tmp_path, added, x, later=str(later), CUDA_CACHE_PATH=str(first))
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    assert files_in(first)["0/a/01"] == b"code" and not later.exists()


def test_the_child_that_captures_it_reports_what_it_found(engine, demo):
    _, _, pkg = demo
    found = read_package(pkg)
    key = next(iter(found.manifest["programs"]))
    binary = bytes(found.parts[f"program {key}"])
    options = found.manifest["programs"][key]["options"]
    files, why = capture_in_child(engine.device, {key: (binary, options)})
    if has_driver_cache(engine.device):
        assert files and not why
    else:                    # the child loaded the binary; PoCL keeps no CUDA cache
        assert files == [] and why == "the driver wrote nothing into its cache folder"
    files, why = capture_in_child(engine.device, {key: (b"not a binary", options)})
    assert files == [] and why.startswith("the process compiling it failed: ")


@pytest.mark.parametrize("variable", ["CUDA_CACHE_DISABLE", "CUSTOMLAYERS_NO_MACHINE_CODE"])
def test_nothing_is_put_there_when_the_cache_is_off_or_the_code_unwanted(demo, tmp_path,
                                                                         variable):
    x, expected, pkg = demo
    added = with_parts(pkg, tmp_path / "with-code.clpkg", {PART_PREFIX + "0/a/01": b"code"})
    cache = tmp_path / "driver-cache"
    got, _ = load_fresh(tmp_path, added, x, CUDA_CACHE_PATH=str(cache), **{variable: "1"})
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    assert "0/a/01" not in files_in(cache) if cache.exists() else True


def test_a_cache_folder_that_cannot_be_written_is_one_notice(demo, engine, tmp_path):
    x, expected, pkg = demo
    added = with_parts(pkg, tmp_path / "with-code.clpkg", {PART_PREFIX + "0/a/01": b"code"})
    blocked = tmp_path / "a-file"
    blocked.write_bytes(b"not a folder")
    got, said = load_fresh(tmp_path, added, x, CUDA_CACHE_PATH=str(blocked))
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    if has_driver_cache(engine.device):
        assert said.count("could not be written") == 1 and str(blocked) in said
    else:                         # nothing to write on another platform: nothing said
        assert "could not be written" not in said


def test_a_part_named_outside_the_cache_or_flipped_is_refused(demo, engine, tmp_path,
                                                              monkeypatch):
    _, _, pkg = demo
    cache = tmp_path / "driver-cache"
    monkeypatch.setenv("CUDA_CACHE_PATH", str(cache))
    bad = with_parts(pkg, tmp_path / "escape.clpkg", {PART_PREFIX + "../../escape": b"x"})
    with pytest.raises(PackageError) as e:
        Network(str(bad), engine=engine)
    assert e.value.part == PART_PREFIX + "../../escape"
    assert not (tmp_path / "escape").exists() and not cache.exists()
    good = with_parts(pkg, tmp_path / "code.clpkg", {PART_PREFIX + "0/a/01": b"code bytes"})
    data = bytearray(good.read_bytes())
    data[data.rindex(b"code bytes")] ^= 1
    flipped = tmp_path / "flipped.clpkg"
    flipped.write_bytes(bytes(data))
    with pytest.raises(PackageError) as e:
        Network(str(flipped), engine=engine)
    assert e.value.part == PART_PREFIX + "0/a/01" and "fails its checksum" in str(e.value)
    assert not cache.exists()


def test_compile_leaves_it_out_when_asked_and_inspect_shows_it(tmp_path, demo, capsys):
    _, _, pkg = demo
    out = tmp_path / "none.clpkg"
    assert cli_main(["compile", "-m", str(DEMO), "-c", *map(str, CONFIGS), "-d", TEST_DEVICE,
                     "--no-machine-code", "-o", str(out)]) == 0
    assert "machine code" not in capsys.readouterr().out
    assert not code_parts(out) and read_package(out).manifest["machine_code"] is None
    added = with_parts(out, tmp_path / "with-code.clpkg",
                       {PART_PREFIX + "0/a/01": b"12345", PART_PREFIX + "0/b/02": b"678"})
    assert cli_main(["inspect", str(added)]) == 0
    assert "machine code 8 bytes in 2 files of NVIDIA's compute cache" in capsys.readouterr().out


def test_compile_refuses_an_output_it_cannot_write_before_compiling(tmp_path, capsys):
    """A package under a file, or named '' (a missing folder is made, as run -o makes one:
    test_package.py)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    for out, said in ((blocker / "demo.clpkg", f"{blocker} is a file, not a folder"),
                      ("", "-o '': an empty path; name the package (.clpkg)")):
        assert cli_main(["compile", "-m", str(DEMO), "-c", *map(str, CONFIGS), "-d",
                         TEST_DEVICE, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert said in err and "compiled" not in err


def test_tuning_given_with_a_package_is_a_note(demo, tmp_path, capsys):
    _, _, pkg = demo
    assert cli_main(["run", "-m", str(pkg), "-d", TEST_DEVICE, "--tuning", "full"]) == 0
    assert "note: --tuning full:" in capsys.readouterr().err
