"""The package file: a simple container, checked whole before any of it is used.

    offset 0   8 bytes   magic b"CLPKG\\0\\r\\n" (the \\r\\n shows a text-mode transfer)
    offset 8   4 bytes   format version, little-endian uint32
    offset 12  8 bytes   manifest size M, little-endian uint64
    offset 20  M bytes   manifest: UTF-8 JSON (format version, versions, device, inputs,
                         and per part its name, offset, size and sha256)
    20 + M     32 bytes  sha256 of the manifest's bytes
    20 + M+32  ...       the parts, end to end, in the manifest's order, to the end of the file

Every byte is covered: the header by the magic, the version and the manifest's size (a wrong
size fails the manifest's hash), the manifest by its hash, the parts by theirs, and the parts
must tile the rest of the file exactly (no gap, no trailing byte). So a truncated file, a flipped
byte or a tampered part is refused, naming what fails, before anything reaches the driver.

Why not a zip: its CRC-32 is no checksum against tampering, its central directory may list
overlapping or duplicate entries, and its reader would add a second format to check; this one
is read in one pass and its checks are short. Written atomically (files.py atomic_writer).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import PackageError, PackageFileError
from ...files import atomic_writer, open_user_file

MAGIC = b"CLPKG\x00\r\n"
FORMAT_VERSION = 1
SUFFIX = ".clpkg"
_HEADER = struct.Struct("<8sIQ")
_DIGEST = 32
MAX_MANIFEST = 64 << 20


@dataclass
class Package:
    """A package read and checked: its manifest and its parts' bytes by name."""
    path: str
    manifest: dict
    parts: dict          # name -> memoryview of the file's bytes (writable: arrays view it)


def is_package(path) -> bool:
    """Whether `path` names a package: by its suffix, else by its first bytes."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    if str(path).endswith(SUFFIX):
        return True
    try:
        with open_user_file(path) as f:    # a regular file only: a FIFO's open would block
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def write_package(path, manifest: dict, parts: list[tuple[str, bytes]]) -> dict:
    """Write `manifest` (its "parts" entry is filled here) and `parts` (name, bytes) as one
    file, atomically; the manifest as a reader sees it."""
    table, offset = [], 0
    for name, data in parts:
        table.append({"name": name, "offset": offset, "size": len(data),
                      "sha256": hashlib.sha256(data).hexdigest()})
        offset += len(data)
    manifest = {**manifest, "format_version": FORMAT_VERSION, "parts": table}
    text = json.dumps(manifest, indent=1, sort_keys=True).encode()
    with atomic_writer(Path(path), 0o644) as f:
        f.write(_HEADER.pack(MAGIC, FORMAT_VERSION, len(text)))
        f.write(text)
        f.write(hashlib.sha256(text).digest())
        for _, data in parts:
            f.write(data)
    return json.loads(text)


def read_manifest(path) -> tuple[dict, int, memoryview]:
    """(the manifest, where the parts start, the file's bytes), the header and the manifest
    checked; PackageError naming what fails."""
    try:
        with open_user_file(path) as f:
            # read into memory, not mapped: the bytes checked are the bytes used, whatever
            # happens to the file after (numpy's empty buffer: not zeroed first)
            buffer = np.empty(os.fstat(f.fileno()).st_size, np.uint8)
            got = f.readinto(memoryview(buffer)) or 0
    except OSError as e:            # a missing file: an input file error (the CLI exits 2)
        raise PackageFileError(f"cannot read the package {path}: {e.strerror or e}", path,
                               e) from None
    data = memoryview(buffer)[:got]
    where = f"the package {path}"
    if len(data) < _HEADER.size or bytes(data[:len(MAGIC)]) != MAGIC:
        name = Path(path).with_suffix(SUFFIX).name
        raise PackageError(f"{where} is not a customlayers package (no package header; make one "
                           f"with `customlayers compile -m MODEL -o {name}`)", "header")
    _, version, size = _HEADER.unpack_from(data)
    again = "copy it again, or compile it anew"
    start = _HEADER.size + size
    if size > MAX_MANIFEST or start + _DIGEST > len(data):
        raise PackageError(f"{where} is truncated or corrupted: its header gives a manifest of "
                           f"{size} bytes; the file has {len(data)} ({again})", "manifest")
    text = bytes(data[_HEADER.size:start])
    if hashlib.sha256(text).digest() != bytes(data[start:start + _DIGEST]):
        raise PackageError(f"{where} is corrupted: its manifest fails its checksum ({again})",
                           "manifest")
    try:
        manifest = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise PackageError(f"{where}: its manifest is not JSON ({e})", "manifest") from None
    # the version read where the manifest's checksum vouches for it: a flipped byte in the
    # header's copy is corruption, not a package from a newer customlayers
    written = manifest.get("format_version") if isinstance(manifest, dict) else None
    if written != version:
        raise PackageError(f"{where} is corrupted: its header says format version {version}, "
                           f"its manifest {written} ({again})", "header")
    if version > FORMAT_VERSION:
        raise PackageError(f"{where} has format version {version}; this customlayers reads "
                           f"format version {FORMAT_VERSION} and older: upgrade customlayers, "
                           f"or compile the package again with this one", "header")
    if version < 1:
        raise PackageError(f"{where} has format version {version}, which no customlayers "
                           f"wrote (a corrupted header)", "header")
    return manifest, start + _DIGEST, data


def read_package(path) -> Package:
    """The package at `path`, every part's size and hash checked against the manifest."""
    manifest, base, data = read_manifest(path)
    where = f"the package {path}"
    table = manifest.get("parts")
    if not isinstance(table, list) or not all(
            isinstance(p, dict) and isinstance(p.get("name"), str) and
            isinstance(p.get("offset"), int) and isinstance(p.get("size"), int) and
            isinstance(p.get("sha256"), str) for p in table):
        raise PackageError(f"{where}: its manifest's part table is malformed", "manifest")
    parts: dict[str, memoryview] = {}
    offset, view = base, data
    for p in table:
        name = p["name"]
        if p["offset"] != offset - base or p["size"] < 0 or name in parts:
            raise PackageError(f"{where}: its manifest's part table is malformed at part "
                               f"'{name}'", "manifest")
        end = offset + p["size"]
        if end > len(data):
            raise PackageError(f"{where} is truncated: part '{name}' needs bytes {offset} to "
                               f"{end}; the file has {len(data)} (copy it again, or compile "
                               f"it anew)", name)
        chunk = view[offset:end]
        if hashlib.sha256(chunk).hexdigest() != p["sha256"]:
            raise PackageError(f"{where} is corrupted: part '{name}' fails its checksum (copy "
                               f"it again, or compile it anew)", name)
        parts[name] = chunk
        offset = end
    if offset != len(data):
        raise PackageError(f"{where} is corrupted: {len(data) - offset} byte(s) after its last "
                           f"part (copy it again, or compile it anew)", "parts")
    return Package(str(path), manifest, parts)
