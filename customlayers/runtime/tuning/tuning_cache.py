"""The tuner's choices on disk: one JSON file per device (platform, device, driver, our
version and a digest of the built-in kernels' sources: a changed kernel is timed anew, where a
choice timed on its old code could now be the slower one), next to the program cache
(`<cache dir>/tuning/<key>.json`), readable by hand:

    {"format": 1, "device": {...identity...},
     "choices": {"Convolution:3f2a...": {"layer": "conv1", "variant": "gemm64x64_4x4_k1",
                                         "mode": "fast", "times_us": {...}, "shapes": [...]}}}

Each write merges with what is on disk and replaces the file atomically (files.atomic_writer),
so two processes tuning at once lose no choices and a reader never sees half a file. A file that
cannot be read or written is a warning and a tuning run, never a crash.
"""
from __future__ import annotations

import hashlib
import json
import warnings
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ... import __version__
from ...files import MIB, atomic_writer, read_user_file
from ..device.cache import CacheWarning, device_identity

FORMAT = 1


@lru_cache(maxsize=1)
def builtin_kernels_digest() -> str:
    """A digest of every built-in kernel source (customlayers/ops/*.cl), by name and text."""
    digest = hashlib.sha256()
    sources = resources.files("customlayers.ops")
    for entry in sorted((e for e in sources.iterdir() if e.name.endswith(".cl")),
                        key=lambda e: e.name):
        digest.update(entry.name.encode() + b"\0" + entry.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class TuningCache:
    def __init__(self, path: Path | None, identity: dict):
        self.path = path                 # None: in memory only
        self.identity = identity
        self._choices: dict | None = None
        self._write_failed = False       # warned once: later choices stay in memory

    @staticmethod
    def for_device(device, enabled: bool = True, directory: Path | None = None,
                   writable: bool = True) -> "TuningCache":
        """`writable` False: the folder is known unwritable (the program cache warned once):
        choices are read from it but kept in memory."""
        identity = dict(device_identity(device), customlayers=__version__,
                        kernels=builtin_kernels_digest())
        if not enabled or directory is None:
            return TuningCache(None, identity)
        key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
        cache = TuningCache(Path(directory) / "tuning" / f"{key}.json", identity)
        cache._write_failed = not writable
        return cache

    @property
    def keeps(self) -> bool:
        """Whether new choices are written to `path` (False: in memory, or its folder cannot
        be written)."""
        return self.path is not None and not self._write_failed

    def get(self, signature: str) -> dict | None:
        return self._loaded().get(signature)

    def put(self, signature: str, record: dict) -> None:
        choices = self._loaded()
        choices[signature] = record
        if self.path is None or self._write_failed:
            return
        try:
            merged = dict(self._read())          # another process may have added some
            merged.update(choices)
            self._choices = merged
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({"format": FORMAT, "device": self.identity, "choices": merged},
                              indent=1, sort_keys=True)
            with atomic_writer(self.path) as f:
                f.write(text.encode("utf-8"))
        except OSError as e:
            self._write_failed = True
            warnings.warn(f"tuning cache {self.path}: cannot write ({e.strerror or e}); choices "
                          f"hold for this process only", CacheWarning, stacklevel=2)

    def _loaded(self) -> dict:
        if self._choices is None:
            self._choices = self._read()
        return self._choices

    def _read(self) -> dict:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(read_user_file(self.path, 64 * MIB).decode("utf-8"))
            if data.get("format") != FORMAT or data.get("device") != self.identity:
                return {}
            choices = data.get("choices")
            return dict(choices) if isinstance(choices, dict) else {}
        except (OSError, ValueError, AttributeError) as e:
            warnings.warn(f"tuning cache {self.path}: cannot read ({e}); layers are timed anew",
                          CacheWarning, stacklevel=2)
            return {}
