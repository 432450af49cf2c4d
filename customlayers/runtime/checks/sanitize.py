"""--sanitize: run custom kernels on Oclgrind, an OpenCL device simulator that checks every
memory access, and report its invalid reads and writes at the user's .cl file and line.

Oclgrind runs in a child process (sanitize_worker.py) that sees only Oclgrind's OpenCL platform
(OCL_ICD_VENDORS names a folder holding its registration alone), so the parent's device, the
other layers of a model and the user's process are untouched, and a kernel that crashes even the
simulator is reported rather than fatal. Debian's `oclgrind` package is installed on first use
when this is root on a machine with apt-get (`make test`'s set-up does it for the tests).
"""
from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ... import settings
from ...errors import DeviceError
from ...jit.launch import KernelLaunch
from ..device.launch_args import ArgumentSource, bind_args
from .checked_child import run_checked

# Debian's package puts the ICD library here; OCLGRIND_ICD overrides it (see settings.py)
ICD_LIBRARIES = ("/usr/lib/oclgrind/liboclgrind-rt-icd.so",
                 "/usr/lib/x86_64-linux-gnu/oclgrind/liboclgrind-rt-icd.so")


@dataclass(frozen=True)
class SanitizeFinding:
    layer: str
    message: str          # e.g. "invalid write of size 4 at work-item Global(7,0,0)"
    place: str            # "file.cl:12:9", or "" when Oclgrind gave none
    source_line: str = ""

    def __str__(self) -> str:
        where = f"{self.place}: " if self.place else ""
        shown = f"\n    {self.source_line.strip()}" if self.source_line.strip() else ""
        return f"{where}layer '{self.layer}': {self.message}{shown}"


def find_oclgrind() -> str | None:
    for path in ICD_LIBRARIES:
        if Path(path).is_file():
            return path
    return None


def ensure_oclgrind(say=print) -> str:
    """The Oclgrind ICD library, installed with apt-get on first use when possible."""
    found = find_oclgrind()
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        say("customlayers: --sanitize needs Oclgrind; installing Debian's oclgrind package")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for command in (["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "oclgrind"]):
            subprocess.run(command, env=env, capture_output=True, timeout=900)
        found = find_oclgrind()
        if found:
            return found
    raise DeviceError("--sanitize runs kernels on Oclgrind, which is not installed: "
                      "apt-get install oclgrind (Debian/Ubuntu), or see "
                      "https://github.com/jrprice/Oclgrind")


def sanitize_launch(launch: KernelLaunch, layer: str, inputs: Sequence[np.ndarray],
                    outputs_nbytes: Sequence[int]) -> list[SanitizeFinding]:
    """Run one launch on Oclgrind with these input buffer contents (for its Arg.input args) and
    output buffers of these sizes; every invalid access it reports, mapped to the user's
    lines."""
    library = ensure_oclgrind()
    args = bind_args(launch.args, _OclgrindArgs(inputs, outputs_nbytes), layer)
    job = {"source": launch.source, "options": launch.options, "entry": launch.entry,
           "global": tuple(launch.global_size),
           "local": tuple(launch.local_size) if launch.local_size else None, "args": args}
    with tempfile.TemporaryDirectory(prefix="customlayers-sanitize-") as tmp:
        vendors = Path(tmp) / "vendors"
        vendors.mkdir()
        (vendors / "oclgrind.icd").write_text(library + "\n")
        job_path = Path(tmp) / "job.pickle"
        job_path.write_bytes(pickle.dumps(job))
        env = dict(os.environ, OCL_ICD_VENDORS=str(vendors), OPENCL_VENDOR_PATH=str(vendors))
        done = run_checked([sys.executable, "-m", "customlayers.runtime.checks.sanitize_worker",
                            str(job_path)], env,
                           f"layer '{layer}': kernel '{launch.entry}' on Oclgrind (--sanitize)")
        if done is None:
            return [SanitizeFinding(layer, f"the kernel did not finish on Oclgrind within "
                                           f"{settings.check_timeout_s():g} s (a loop that never "
                                           f"ends? CUSTOMLAYERS_CHECK_TIMEOUT sets the limit)",
                                    "")]
    findings = parse_oclgrind_log(done.stderr, launch.line_map, layer, launch.source)
    result = _last_json(done.stdout)
    if done.returncode != 0 or result is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        findings.append(SanitizeFinding(layer, f"the run on Oclgrind failed (exit "
                                               f"{done.returncode}): {tail}", ""))
    elif result.get("error"):
        findings.append(SanitizeFinding(layer, f"Oclgrind: {result['error']}", ""))
    return findings


class _OclgrindArgs(ArgumentSource):
    """The arguments as the worker (sanitize_worker.py) takes them, picklable: ("buffer",
    its initial bytes), ("local", bytes) or ("scalar", value)."""

    def __init__(self, inputs: Sequence[np.ndarray], outputs_nbytes: Sequence[int]):
        self.inputs, self.outputs_nbytes = inputs, outputs_nbytes

    def input(self, arg, position):
        return ("buffer", np.ascontiguousarray(self.inputs[arg.index]).tobytes())

    def output(self, arg, position):
        return ("buffer", bytes(max(int(self.outputs_nbytes[arg.index]), 1)))

    def const(self, arg, position):
        return ("buffer", np.ascontiguousarray(arg.value).tobytes())

    def scratch(self, arg, position):
        return ("buffer", bytes(max(arg.nbytes, 1)))

    def scalar(self, arg, position):
        return ("scalar", arg.value)

    def local(self, arg, position):
        return ("local", arg.nbytes)


def _last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


_HEADER = re.compile(r"^(?P<what>Invalid (?:read|write)[^\n]*|Uninitialized[^\n]*|"
                     r"Data race[^\n]*|Work-group divergence[^\n]*|"
                     r"Out-of-bounds[^\n]*)$", re.M)
_ENTITY = re.compile(r"Entity: (?P<entity>[^\n]+)")
_AT_LINE = re.compile(r"At line (?P<line>\d+)(?: \(column (?P<col>\d+)\))? of (?P<file>[^\n]+?):"
                      r"\n(?P<source>[^\n]*)")


def parse_oclgrind_log(log: str, line_map: Sequence, layer: str,
                      source: str = "") -> list[SanitizeFinding]:
    """Oclgrind's reports (one block per problem, separated by blank lines) as findings, one per
    kind of access and place, with how many work-items made it and the first of them. The place
    is the user's file and line (the program's #line directives, or its line map when Oclgrind
    names the generated text), shown with the user's own source line."""
    users = {entry[0] for entry in line_map if entry}
    generated = source.split("\n")
    found: dict[tuple[str, str], list] = {}
    for block in re.split(r"\n\s*\n", log):
        header = _HEADER.search(block)
        if not header:
            continue
        kind = re.sub(r" at (?:global|local|private|constant) memory address 0x[0-9a-fA-F]+", "",
                      header.group("what").strip().rstrip(":"))
        entity = _ENTITY.search(block)
        item = entity.group("entity").split(" Local")[0].strip() if entity else ""
        place, text = "", ""
        at = _AT_LINE.search(block)
        if at:
            file, line = at.group("file"), int(at.group("line"))
            col = f":{at.group('col')}" if at.group("col") else ""
            if file not in users:
                # Oclgrind (its clang) may print a user file's path relative to a folder of
                # its choosing: the user file whose path ends with the one printed
                ends = [u for u in users if u == os.path.abspath(file)
                        or u.endswith(os.sep + file.lstrip("./" + os.sep))]
                if len(ends) == 1:
                    file = ends[0]
                elif 1 <= line <= len(line_map) and line_map[line - 1]:
                    file, line = line_map[line - 1]
            place = f"{file}:{line}{col}"
            origin = (file, line)
            text = next((generated[i] for i, o in enumerate(line_map)
                         if o == origin and i < len(generated)), at.group("source"))
        entry = found.setdefault((kind, place), [0, item, text])
        entry[0] += 1
    return [SanitizeFinding(layer, f"{kind[0].lower()}{kind[1:]} by {count} work-item"
                                   f"{'s' if count != 1 else ''}"
                                   f"{f' (the first: {item})' if item else ''}", place, text)
            for (kind, place), (count, item, text) in found.items()]


def sanitize_kernel(bound, *arrays: np.ndarray, **data: np.ndarray) -> list[SanitizeFinding]:
    """A BoundKernel (execute/kernel.py) run once like its __call__ on Oclgrind: every invalid
    memory access found, at the user's .cl lines ([] when none)."""
    launch, packed = bound.prepared_call(*arrays, **data)
    return sanitize_launch(launch, bound.spec.name, packed, [d.nbytes for d in bound.outputs])
