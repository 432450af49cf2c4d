"""A small codec for a compiled plan's values, without pickle: tagged JSON for the structure and
one binary blob for the numpy arrays.

JSON keeps None, bools, ints, strings, finite floats (Python writes the shortest text that
reads back to the same double) and lists as they are; everything else is an object with one
tag:  {"$t": [...]} a tuple, {"$d": [[key, value], ...]} a dict (keys of any storable kind),
{"$fs": [...]} a frozenset, {"$f": "0x1.8p+1"} a float JSON has no text for (inf, nan),
{"$a": [offset, dtype, shape]} an array in the blob, {"$s": [dtype, hex bytes]} a numpy scalar
(bit for bit), {"$c": "Name", "f": {...}} a dataclass of the allow-list, by its fields.

Decoding constructs only the allow-listed classes the caller names (never a class or module
the file names), reads arrays of plain numeric element types only, and refuses anything else
with a PackageError naming the part: a tampered file that passed its checksum cannot make it
run code.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np

from ...errors import PackageError

ALIGN = 64          # each array starts at a multiple of this in the blob
# plain numeric element types: bool, ints, floats, complex; no objects, no structures
_DTYPE = re.compile(r"[<>|=]?[biufc]\d{1,2}")


class Encoder:
    """Encodes values into JSON-able structure; arrays go into `blob` (the same array object
    once)."""

    def __init__(self, classes):
        self.classes = {c.__name__: c for c in classes}
        self.blob = bytearray()
        self._arrays: dict[int, tuple] = {}     # id(array) -> (array kept alive, its tag)

    def encode(self, v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and not isinstance(v, np.integer):
            return v
        if isinstance(v, float) and not isinstance(v, np.floating):
            return v if math.isfinite(v) else {"$f": v.hex()}
        if isinstance(v, np.ndarray):
            return self._array(v)
        if isinstance(v, np.generic):
            return {"$s": [_dtype_text(v.dtype), v.tobytes().hex()]}
        if isinstance(v, list):
            return [self.encode(x) for x in v]
        if isinstance(v, tuple):
            return {"$t": [self.encode(x) for x in v]}
        if isinstance(v, dict):
            return {"$d": [[self.encode(k), self.encode(x)] for k, x in v.items()]}
        if isinstance(v, frozenset):
            return {"$fs": [self.encode(x) for x in v]}
        name = type(v).__name__
        if dataclasses.is_dataclass(v) and self.classes.get(name) is type(v):
            return {"$c": name, "f": {f.name: self.encode(getattr(v, f.name))
                                      for f in dataclasses.fields(v) if f.init}}
        raise PackageError(f"a compiled plan holds a value of type {type(v).__module__}."
                           f"{type(v).__qualname__}, which a package cannot store")

    def _array(self, a: np.ndarray):
        found = self._arrays.get(id(a))
        if found is not None:
            return found[1]
        if not _DTYPE.fullmatch(_dtype_text(a.dtype)):
            raise PackageError(f"a compiled plan holds an array of element type {a.dtype}, "
                               f"which a package cannot store")
        self.blob += bytes(-len(self.blob) % ALIGN)
        tag = {"$a": [len(self.blob), _dtype_text(a.dtype), list(a.shape)]}
        self.blob += np.ascontiguousarray(a).tobytes()
        self._arrays[id(a)] = (a, tag)
        return tag


def _dtype_text(dtype: np.dtype) -> str:
    return np.dtype(dtype).str


class Decoder:
    """Decodes what Encoder wrote; `blob`: the arrays' bytes (a bytearray: the arrays are views
    of it, writable as numpy's own); `part`: the part's name for messages."""

    def __init__(self, classes, blob, part: str):
        self.classes = {c.__name__: c for c in classes}
        self.blob = blob
        self.part = part

    def refuse(self, what: str) -> PackageError:
        return PackageError(f"the package's part '{self.part}' is malformed: {what}", self.part)

    def decode(self, v):
        if v is None or isinstance(v, (bool, str, int, float)):
            return v
        if isinstance(v, list):
            return [self.decode(x) for x in v]
        if not isinstance(v, dict) or not v:
            raise self.refuse(f"a value of type {type(v).__name__}")
        tag = next(iter(v))
        body = v[tag]
        if tag == "$c" and set(v) == {"$c", "f"}:
            return self._dataclass(body, v["f"])
        if len(v) != 1:
            raise self.refuse(f"an object with keys {sorted(v)[:4]}")
        if tag == "$t" and isinstance(body, list):
            return tuple(self.decode(x) for x in body)
        if tag == "$d" and isinstance(body, list):
            if not all(isinstance(p, list) and len(p) == 2 for p in body):
                raise self.refuse("a dict whose items are not pairs")
            return {self._key(k): self.decode(x) for k, x in body}
        if tag == "$fs" and isinstance(body, list):
            return frozenset(self._key(x) for x in body)
        if tag == "$f" and isinstance(body, str):
            try:
                return float.fromhex(body)
            except ValueError:
                raise self.refuse(f"the float {body!r}") from None
        if tag == "$a" and isinstance(body, list) and len(body) == 3:
            return self._array(*body)
        if tag == "$s" and isinstance(body, list) and len(body) == 2:
            return self._scalar(*body)
        raise self.refuse(f"the tag {tag!r}")

    def _key(self, k):
        key = self.decode(k)
        try:
            hash(key)
        except TypeError:
            raise self.refuse(f"an unhashable key of type {type(key).__name__}") from None
        return key

    def _dtype(self, text) -> np.dtype:
        if not isinstance(text, str) or not _DTYPE.fullmatch(text):
            raise self.refuse(f"the element type {text!r}")
        return np.dtype(text)

    def _array(self, offset, dtype, shape) -> np.ndarray:
        dt = self._dtype(dtype)
        if not (isinstance(offset, int) and offset >= 0 and isinstance(shape, list) and
                all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise self.refuse(f"the array reference {[offset, dtype, shape]}")
        count = math.prod(shape)
        if offset + count * dt.itemsize > len(self.blob):
            raise self.refuse(f"an array of {count * dt.itemsize} bytes at {offset} runs past "
                              f"the {len(self.blob)} bytes of the arrays")
        return np.frombuffer(self.blob, dt, count, offset).reshape(shape)

    def _scalar(self, dtype, data) -> np.generic:
        dt = self._dtype(dtype)
        try:
            raw = bytes.fromhex(data)
        except (TypeError, ValueError):
            raise self.refuse(f"the scalar bytes {data!r}") from None
        if len(raw) != dt.itemsize:
            raise self.refuse(f"a {dt} scalar of {len(raw)} bytes")
        return np.frombuffer(raw, dt)[0]

    def _dataclass(self, name, fields):
        cls = self.classes.get(name) if isinstance(name, str) else None
        if cls is None:
            raise self.refuse(f"the class {name!r}, which is not one a package holds")
        wanted = {f.name for f in dataclasses.fields(cls) if f.init}
        if not isinstance(fields, dict) or set(fields) != wanted:
            raise self.refuse(f"a {name} whose fields are not {sorted(wanted)}")
        try:
            return cls(**{k: self.decode(x) for k, x in fields.items()})
        except PackageError:
            raise
        except Exception as e:       # noqa: BLE001 - the class's own checks refuse the values
            raise self.refuse(f"a {name} ({type(e).__name__}: {e})") from None


def dumps(structure) -> bytes:
    """The encoded structure as JSON bytes (compact; NaN never written: tagged above)."""
    return json.dumps(structure, separators=(",", ":"), allow_nan=False).encode()


def loads(data: bytes, part: str):
    try:
        return json.loads(bytes(data).decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise PackageError(f"the package's part '{part}' is malformed: not JSON "
                           f"({type(e).__name__}: {e})", part) from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")
