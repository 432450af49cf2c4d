"""The compiled package's file format without a device: the codec (tagged JSON and an array
blob, no pickle: only allow-listed classes are made) and the container (every byte checked:
a flipped byte anywhere, a truncated file, a newer format are refused naming what fails)."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from customlayers.errors import ModelError, PackageError
from customlayers.jit.launch import Arg, KernelLaunch
from customlayers.jit.layer import Stage
from customlayers.jit.tensor import TensorDesc
from customlayers.runtime.package.codec import Decoder, Encoder, dumps, loads
from customlayers.runtime.package.container import (FORMAT_VERSION, MAGIC, is_package,
                                                    read_package, write_package)

CLASSES = (Stage, KernelLaunch, Arg, TensorDesc)


def roundtrip(value, classes=CLASSES):
    enc = Encoder(classes)
    text = dumps(enc.encode(value))
    return Decoder(classes, bytearray(enc.blob), "plans").decode(loads(text, "plans"))


def test_values_come_back_equal_and_typed_bit_for_bit():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    value = {("temp", "n1", 0): TensorDesc((1, 3, 4, 5), "f16", lower_pad=(0, 0, 1, 1)),
             ("const", "n2", ("w", 1)): a, 3: (None, True, 1.5, float("inf"), "x"),
             "s": [np.float32(0.1), np.int64(-3), np.uint8(255)],
             "fs": frozenset({"a", ("b", 1)}), "nan": float("nan"),
             "launch": KernelLaunch("program abc", "k", (Arg.input(0), Arg.const(a),
                                                          Arg.scalar(np.int32(7))), (4, 1))}
    got = roundtrip(value)
    assert got[("temp", "n1", 0)] == value[("temp", "n1", 0)]
    assert got[("const", "n2", ("w", 1))].dtype == np.float32
    assert np.array_equal(got[("const", "n2", ("w", 1))], a)
    assert got[3] == (None, True, 1.5, float("inf"), "x")
    assert [type(s) for s in got["s"]] == [np.float32, np.int64, np.uint8]
    assert got["s"][0].tobytes() == np.float32(0.1).tobytes()
    assert got["fs"] == value["fs"] and np.isnan(got["nan"])
    launch = got["launch"]
    assert launch.args[2].value == np.int32(7) and type(launch.args[2].value) is np.int32
    assert np.array_equal(launch.args[1].value, a) and launch.global_size == (4, 1)


def test_one_array_object_is_stored_once():
    a = np.ones(1000, np.float32)
    enc = Encoder(CLASSES)
    enc.encode([a, a, {"x": a}])
    assert len(enc.blob) == a.nbytes


@pytest.mark.parametrize("value", [object(), np.array(["a"], dtype=object), {1, 2},
                                   b"bytes"], ids=["object", "object-array", "set", "bytes"])
def test_a_value_the_codec_cannot_store_is_refused_naming_its_type(value):
    with pytest.raises(PackageError, match="cannot store"):
        Encoder(CLASSES).encode(value)


@pytest.mark.parametrize("text, what", [
    ('{"$c": "Popen", "f": {}}', "the class 'Popen'"),
    ('{"$c": "os.system", "f": {"command": "true"}}', "the class 'os.system'"),
    ('{"$c": "Arg", "f": {"kind": "input"}}', "fields are not"),
    ('{"$a": [0, "|O", [1]]}', "element type '|O'"),
    ('{"$a": [0, "<f4", [1000]]}', "runs past"),
    ('{"$x": 1}', "the tag '$x'"),
    ('{"a": 1, "b": 2}', "an object with keys"),
    ('{"$d": [[{"$t": [[1]]}, 1]]}', "unhashable key"),
    ('NaN', "not JSON"),
    ('{"$c": "TensorDesc", "f": {"shape": {"$t": [-1]}, "dtype": "f32", "format": "BFYX", '
     '"lower_pad": {"$t": [0,0,0,0]}, "upper_pad": {"$t": [0,0,0,0]}}}', "TensorError"),
])
def test_a_malformed_part_is_refused_and_constructs_nothing_else(text, what):
    with pytest.raises(PackageError, match="part 'plans' is malformed") as e:
        Decoder(CLASSES, bytearray(16), "plans").decode(loads(text.encode(), "plans"))
    assert what in str(e.value) and e.value.part == "plans"
    assert isinstance(e.value, ModelError)


def write(tmp_path, version=FORMAT_VERSION):
    """A small package; `version`: the format version its writer gives (header and manifest)."""
    from customlayers.runtime.package import container
    path = tmp_path / "m.clpkg"
    ours, container.FORMAT_VERSION = container.FORMAT_VERSION, version
    try:
        write_package(path, {"customlayers_version": "0"},
                      [("graph", b'{"a": 1}'), ("arrays", bytes(range(200))),
                       ("program abc", b"binary" * 10)])
    finally:
        container.FORMAT_VERSION = ours
    return path


def test_a_package_reads_back_its_parts(tmp_path):
    path = write(tmp_path)
    pkg = read_package(path)
    assert bytes(pkg.parts["arrays"]) == bytes(range(200))
    assert bytes(pkg.parts["program abc"]) == b"binary" * 10
    assert pkg.manifest["format_version"] == FORMAT_VERSION
    assert is_package(path) and not is_package(tmp_path / "none.xml")
    other = tmp_path / "renamed.bin"
    other.write_bytes(path.read_bytes())
    assert is_package(other)          # by its magic


def test_every_flipped_byte_is_refused_naming_the_part(tmp_path):
    path = write(tmp_path)
    data = path.read_bytes()
    manifest = read_package(path).manifest
    base = len(data) - sum(p["size"] for p in manifest["parts"])
    where = {}
    for p in manifest["parts"]:
        for i in range(p["size"]):
            where[base + p["offset"] + i] = p["name"]
    for offset in range(len(data)):
        bad = bytearray(data)
        bad[offset] ^= 0x01
        path.write_bytes(bytes(bad))
        with pytest.raises(PackageError) as e:
            read_package(path)
        expected = where.get(offset)
        if expected is not None:
            assert e.value.part == expected and f"part '{expected}' fails its checksum" in \
                str(e.value)
        else:
            assert e.value.part in ("header", "manifest"), (offset, str(e.value))


def test_a_truncated_or_extended_file_is_refused(tmp_path):
    path = write(tmp_path)
    data = path.read_bytes()
    for size in (0, 5, 19, 40, len(data) - 61, len(data) - 1):
        path.write_bytes(data[:size])
        with pytest.raises(PackageError, match="truncated|not a customlayers package"):
            read_package(path)
    path.write_bytes(data + b"\0")
    with pytest.raises(PackageError, match="after its last part"):
        read_package(path)


def test_a_newer_format_is_refused_naming_both_versions(tmp_path):
    path = write(tmp_path, FORMAT_VERSION + 1)
    with pytest.raises(PackageError) as e:
        read_package(path)
    assert f"format version {FORMAT_VERSION + 1}" in str(e.value)
    assert f"reads format version {FORMAT_VERSION} and older" in str(e.value)


def test_a_flipped_byte_in_the_headers_version_is_corruption_not_a_newer_format(tmp_path):
    path = write(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(MAGIC) + 1] ^= 1                     # version 1 -> 257
    path.write_bytes(bytes(data))
    with pytest.raises(PackageError) as e:
        read_package(path)
    assert e.value.part == "header" and "is corrupted: its header says format version " \
        f"{FORMAT_VERSION + 256}, its manifest {FORMAT_VERSION}" in str(e.value)
    assert "upgrade" not in str(e.value) and "copy it again" in str(e.value)


def test_a_re_signed_manifest_with_a_bad_part_table_is_refused(tmp_path):
    """A manifest edited and signed again (its hash recomputed): the part table must still
    tile the file."""
    import hashlib
    path = write(tmp_path)
    data = path.read_bytes()
    size = struct.unpack_from("<Q", data, 12)[0]
    manifest = json.loads(data[20:20 + size])
    manifest["parts"][1]["offset"] += 1
    text = json.dumps(manifest).encode()
    rest = data[20 + size + 32:]
    path.write_bytes(data[:12] + struct.pack("<Q", len(text)) + text +
                     hashlib.sha256(text).digest() + rest)
    with pytest.raises(PackageError, match="part table is malformed at part 'arrays'"):
        read_package(path)
