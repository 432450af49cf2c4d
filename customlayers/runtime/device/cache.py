"""The program cache: compiled OpenCL programs kept in memory and on disk (SPEC section 5).

The key hashes everything that changes the binary: a format version, the final source text, the
build options, the platform, device and driver identity, and this package's version (OpenVINO's
key missed the .cl contents and served stale kernels; tinygrad's missed the driver).

On disk, one folder per key holds `program.bin`, `source.cl` and `meta.json` (inspectable by
hand). Where asking the driver for the binary would compile the program once more for nothing
while its own cache keeps it (a PoCL that specializes its work-groups: limits.binary_is_wasted),
the entry holds no `program.bin` and is built again from its source, which the driver's cache
answers (stop 27); such a warm load is as warm as the driver's cache (emptied, the build is a
full compile, still counted as a disk hit).
Each file is written to a temporary name and moved into place with os.replace; meta.json goes
last and records the binary's hash, so a half-written entry is never read. Any cache problem
is a warning and a fresh build, never a crash that hides the real error. A folder that cannot be
written (read-only, under a file, a full disk) is one warning, found by `check_directory` before
anything is built or at the first write: the cache then only reads (a read-only cache that others
filled still serves its entries).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from collections import OrderedDict
import warnings
from pathlib import Path
from typing import Callable, Sequence

import pyopencl as cl

from ... import __version__, settings
from ...errors import KernelBuildError
from ...files import MIB, atomic_writer, read_user_file
from .build import compile_source, load_binary, program_binary, say_on_stderr
from .limits import binary_is_wasted

# 2: meta.json records binary_size; 3: division built exact (build.py); 4: entries without a
# binary where the driver keeps the program (meta.json: kept_by_driver)
FORMAT_VERSION = 4
# programs kept in memory per cache, the least recently used dropped past it: a long process
# (a server, the test suite) that builds networks of many shapes kept every program it ever
# built (on PoCL about 150 KB each). A network holds its own programs' kernels, so dropping
# one here costs a disk hit the next time it is asked for, never a live network's program.
MEMORY_ENTRIES = 1024


class CacheWarning(UserWarning):
    """The on-disk program cache could not be read or written; the program was built anew."""


def device_identity(device) -> dict[str, str]:
    platform = device.platform
    return {
        "platform": platform.name.strip(),
        "platform_version": platform.version.strip(),
        "device": device.name.strip(),
        "device_version": device.version.strip(),
        "driver": device.driver_version.strip(),
    }


def cache_key(source: str, options: str, device) -> str:
    """sha256 over the format version, source, options, device identity and our version."""
    h = hashlib.sha256()
    parts = [str(FORMAT_VERSION), source, options, *device_identity(device).values(), __version__]
    for part in parts:
        data = part.encode("utf-8", "surrogateescape")
        h.update(len(data).to_bytes(8, "little"))   # length-prefixed: no two splits collide
        h.update(data)
    return h.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


class ProgramCache:
    """Builds programs through an in-memory and an on-disk cache.

    `hits` counts memory hits, `disk_hits` disk hits, `misses` real compilations. Memory
    keeps the `memory_entries` programs used last. `binaries`: whether entries keep the
    program's binary; None (the default) as CUSTOMLAYERS_KEEP_BINARIES says, and where it is
    unset, except where the binary would cost a compile for nothing (binary_is_wasted)."""

    def __init__(self, directory: Path | None = None, enabled: bool | None = None,
                 verbose: bool | None = None, memory_entries: int = MEMORY_ENTRIES,
                 binaries: bool | None = None):
        self.directory = Path(directory) if directory is not None else settings.cache_dir()
        self.enabled = settings.cache_enabled() if enabled is None else enabled
        self.verbose = settings.verbose() if verbose is None else verbose
        self._memory: OrderedDict[tuple[int, str], tuple[cl.Program, str]] = OrderedDict()
        self._memory_entries = memory_entries
        self.binaries = settings.keep_binaries() if binaries is None else binaries
        self._memory_lock = threading.Lock()     # parallel builds (parallel_build.py) share it
        self.writable = True     # False once the folder is found unwritable (warned once)
        self.write_problem = ""  # then why: "the program cache folder ... cannot be written (...)"
        self.hits = 0
        self.disk_hits = 0
        self.misses = 0
        self.worker_builds = 0   # of the misses, those a build worker process compiled
        self._built_elsewhere: set[str] = set()   # keys a worker compiled, not yet read here
        # called (from any build thread) as a program is about to be compiled here: a command
        # can say why a first run is slow (PoCL: about 1 s a program) before the wait
        self.before_compile: Callable[[], None] | None = None

    def entry_dir(self, key: str) -> Path:
        return self.directory / "programs" / key

    def build(self, context, device, source: str, options: str = "", *,
              line_map: Sequence = (), label: str = "") -> cl.Program:
        """The built program for `source` on `device`: from memory, from disk, or compiled.
        KernelBuildError when the compiler refuses the source."""
        return self.build_with_warnings(context, device, source, options, line_map=line_map,
                                        label=label)[0]

    def build_with_warnings(self, context, device, source: str, options: str = "", *,
                            line_map: Sequence = (), label: str = "") -> tuple[cl.Program, str]:
        """`build`, and the compiler's warnings at the user's lines ('' when none). They are
        kept with the entry, so a cache hit still has them; verbose prints them to stderr."""
        key = cache_key(source, options, device)
        mem_key = (context.int_ptr, key)
        with self._memory_lock:
            found = self._memory.get(mem_key)
            if found is not None:
                self._memory.move_to_end(mem_key)
        if found is not None:
            self.hits += 1
            self._report("memory hit", label, key)
            return found
        start = time.perf_counter()
        loaded = self._load(context, device, key, source, options, line_map, label) \
            if self.enabled else None
        if loaded is not None:
            program, warned, from_source = loaded
            if from_source and self.keeps_binary(device) and self.writable:
                # an entry without a binary (written where PoCL specialized its work-groups,
                # or under CUSTOMLAYERS_KEEP_BINARIES=0), read by a cache that keeps them: it
                # gets one, once (on PoCL a compile of each kernel for any size)
                self._store(device, key, program, source, options, label, warned)
            if key in self._built_elsewhere:      # compiled for this request, by a worker
                self._built_elsewhere.discard(key)
                self.misses += 1
                self._report("miss, built by a worker", label, key, start)
            else:
                self.disk_hits += 1
                self._report("disk hit", label, key, start)
        else:
            if self.before_compile is not None:
                self.before_compile()
            program, warned = compile_source(context, device, source, options,
                                             line_map=line_map, label=label,
                                             save_dir=self.directory)
            self.misses += 1
            self._report("miss, built", label, key, start)
            if self.enabled and self.writable:
                self._store(device, key, program, source, options, label, warned)
        self._report_warnings(label, warned)
        with self._memory_lock:
            self._memory[mem_key] = (program, warned)
            while len(self._memory) > self._memory_entries:
                self._memory.popitem(last=False)
        return program, warned

    def built_elsewhere(self, device, source: str, options: str = "") -> None:
        """A build worker process compiled this program into the disk cache for us: reading
        it counts as the miss it is (misses: the programs compiled for this process)."""
        self.worker_builds += 1
        self._built_elsewhere.add(cache_key(source, options, device))

    def has(self, context, device, source: str, options: str = "") -> bool:
        """Whether `build` would find the program in memory or on disk (not compile it)."""
        key = cache_key(source, options, device)
        with self._memory_lock:
            if (context.int_ptr, key) in self._memory:
                return True
        return self.enabled and (self.entry_dir(key) / "meta.json").exists()

    def is_empty(self) -> bool:
        """Whether the disk cache holds no entry at all (a first load on this machine, or
        under a new cache folder): the first network then compiles every program it needs.
        False where the cache is off."""
        if not self.enabled:
            return False
        try:
            with os.scandir(self.directory / "programs") as entries:
                return next(entries, None) is None
        except OSError:         # no folder yet (or none that can be read: nothing to read)
            return True

    def claim_first_load(self, device) -> bool:
        """True once per cache folder and device: the mark of a first load
        (`first-load/<device>`, made atomically: of two processes, one gets True). False where
        it was made before or cannot be made (nothing warned: only build_workers.start_early
        asks, and nothing depends on it but an early start)."""
        identity = json.dumps(device_identity(device), sort_keys=True).encode()
        mark = self.directory / "first-load" / hashlib.sha256(identity).hexdigest()[:24]
        try:
            mark.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except OSError:
            return False
        return True

    def clear_memory(self) -> None:
        with self._memory_lock:
            self._memory.clear()

    # -- disk --------------------------------------------------------------------------------
    def keeps_binary(self, device) -> bool:
        """Whether this cache's entries for `device` hold the program's binary."""
        return self.binaries if self.binaries is not None else not binary_is_wasted(device)

    def _load(self, context, device, key: str, source: str, options: str,
              line_map: Sequence, label: str) -> tuple[cl.Program, str, bool] | None:
        """(program, its warnings, whether it was built from the source: an entry the driver
        keeps), or None where the entry is missing or unusable (warned)."""
        folder = self.entry_dir(key)
        meta_path = folder / "meta.json"
        try:
            if not meta_path.exists():
                return None
            meta = json.loads(read_user_file(meta_path, MIB))
            if not isinstance(meta, dict):
                raise ValueError(f"meta.json holds {type(meta).__name__}, not an object")
            warned = meta.get("warnings", "")
            if not isinstance(warned, str):
                raise ValueError("meta.json's warnings are not text")
            if meta.get("kept_by_driver") is True:
                # built from the source the key was made of: the driver's cache answers it
                # (the text has built before, so its warnings are the entry's)
                program, _ = compile_source(context, device, source, options,
                                            line_map=line_map, label=label,
                                            save_dir=self.directory)
                return program, warned, True
            binary = read_user_file(folder / "program.bin")
            # both the size and the hash, before the driver sees a byte: a driver may crash
            # the process (not fail) on a truncated binary, and a hash alone can be rewritten
            # along with the file
            if len(binary) != meta.get("binary_size") or not binary:
                raise ValueError(f"program.bin has {len(binary)} bytes, meta.json says "
                                 f"{meta.get('binary_size')}")
            if hashlib.sha256(binary).hexdigest() != meta.get("binary_sha256"):
                raise ValueError("program.bin does not match the hash in meta.json")
            return load_binary(context, device, binary, options), warned, False
        except KernelBuildError:
            raise       # an entry without a binary, its source refused: the compiler's own
            #             error at the user's line, not a warning and the same build again
        except Exception as e:  # noqa: BLE001 - any failure here means "build anew", never a crash
            self._warn(f"cache entry {folder} is unusable ({type(e).__name__}: {e}); "
                       f"building anew")
            return None

    def _store(self, device, key: str, program: cl.Program, source: str, options: str,
               label: str, warned: str = "") -> None:
        folder = self.entry_dir(key)
        try:
            if self.keeps_binary(device):
                binary = program_binary(program, device)
                if not binary:
                    return      # some drivers give no binary: nothing to keep
                kept = {"binary_sha256": hashlib.sha256(binary).hexdigest(),
                        "binary_size": len(binary)}
            else:
                binary, kept = None, {"kept_by_driver": True}
            folder.mkdir(parents=True, exist_ok=True)
            if binary is not None:
                _write_atomic(folder / "program.bin", binary)
            _write_atomic(folder / "source.cl", source.encode("utf-8", "surrogateescape"))
            meta = {"format_version": FORMAT_VERSION, "key": key, "label": label,
                    "options": options, "customlayers_version": __version__, **kept,
                    "warnings": warned,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    **device_identity(device)}
            _write_atomic(folder / "meta.json", json.dumps(meta, indent=2).encode())
        except OSError as e:
            self._cannot_write(e.strerror or str(e))
        except cl.Error as e:
            self._warn(f"could not write the program cache at {folder} ({e})")

    def check_directory(self) -> bool:
        """Whether the disk cache's folder can be written (made when missing, then probed with
        a temporary file: permission bits say nothing for root or a read-only mount). When it
        cannot, one CacheWarning naming it, and the cache only reads from then on."""
        if not self.enabled or not self.writable:
            return self.writable
        folder = self.directory
        try:
            if folder.exists() and not folder.is_dir():
                raise NotADirectoryError(20, "it is a file, not a folder", str(folder))
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as e:
            self._cannot_write(e.strerror or str(e))
        return self.writable

    def _cannot_write(self, why: str) -> None:
        if self.writable:
            self.writable = False
            self.write_problem = f"the program cache folder {self.directory} cannot be " \
                f"written ({why})"
            self._warn(f"{self.write_problem}; programs built in this process are not kept")

    # -- reporting ---------------------------------------------------------------------------
    def _warn(self, message: str) -> None:
        warnings.warn(message, CacheWarning, stacklevel=3)

    def _report_warnings(self, label: str, warned: str) -> None:
        if warned and self.verbose:
            name = f" of layer '{label}'" if label else ""
            say_on_stderr(f"customlayers: compiler warnings{name}:\n{warned}")

    def _report(self, what: str, label: str, key: str, start: float | None = None) -> None:
        if not self.verbose:
            return
        took = f" in {(time.perf_counter() - start) * 1000:.1f} ms" if start is not None else ""
        name = f" {label}" if label else ""
        say_on_stderr(f"customlayers: program cache {what}{took}:{name} [{key[:12]}]")
