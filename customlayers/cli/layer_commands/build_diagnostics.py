"""Errors of the layer-compile pipeline (Registry.bind) as validate's Diagnostics: formatted
here, at the edge. A build error becomes one Diagnostic per located line of the compiler's log
(already mapped to the user's files and lines); any other error one Diagnostic at the place it
carries (`location`, `code`)."""
from __future__ import annotations

import re

from ...config.diagnostics import ERROR, WARNING, Diagnostic
from ...errors import CustomLayersError, KernelBuildError

_LOCATED = re.compile(r"(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?"
                      r"(?:\s*<(?:Spelling=(?P<spelled>[^>]*)|[^>]*)>)?:\s*")
# a `<Spelling=FILE:L:C>` place: where a macro's text was written (a header's #define)
_PLACE = re.compile(r"(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?$")


def error_diagnostics(error: CustomLayersError, fallback, layer: str) -> list[Diagnostic]:
    """The Diagnostics of an error raised by Registry.bind; `fallback` is the place to report
    an error that carries none (the layer's <CustomLayer> element)."""
    if isinstance(error, KernelBuildError) and not error.options_rejected:
        return log_diagnostics(error, error.code or "CL080")
    at = error.location or fallback
    if isinstance(error, KernelBuildError):      # the driver refused the options
        shown = error.options if error.user_options is None else error.user_options
        message = (f"the OpenCL compiler rejects the build options '{shown}': "
                   f"{error.log.strip() or 'no build log'} (device {error.device})")
    else:
        message = error.describe()
    return [Diagnostic(at.file, at.line, at.column, ERROR, error.code or "CL081", message,
                       layer)]


def log_diagnostics(error: KernelBuildError, code: str = "CL080") -> list[Diagnostic]:
    """One Diagnostic per `FILE:LINE:COL ... error|warning: message` line of a mapped log; one
    for the whole failure when no line has a place."""
    found = log_line_diagnostics(error.log, error.layer, code)
    if not any(d.severity == ERROR for d in found):
        found.append(Diagnostic(error.source_path or "<generated>", 0, 1, ERROR, code,
                                f"{error.message}: {error.log.strip() or 'no build log'} "
                                f"(device {error.device}; options '{error.options}')",
                                error.layer))
    return found


def log_line_diagnostics(log: str, layer: str | None, code: str) -> list[Diagnostic]:
    """The lines of a mapped compiler log that carry a place and a severity, as Diagnostics."""
    found: list[Diagnostic] = []
    for text in log.splitlines():
        # PoCL writes "error: FILE:L:C: msg", clang and NVIDIA "FILE:L:C: error: msg"
        m = re.match(r"\s*(?P<sev>error|warning):\s*", text)
        rest = text[m.end():] if m else text
        lm = _LOCATED.match(rest)
        if not lm:
            continue
        msg = rest[lm.end():].strip()
        sev = m.group("sev") if m else None
        sm = re.match(r"(?:fatal )?(?P<sev>error|warning):\s*", msg)
        if sm:
            sev, msg = sev or sm.group("sev"), msg[sm.end():]
        if sev is None:
            continue
        file, line, col = lm.group("file"), int(lm.group("line")), int(lm.group("col") or 1)
        spelled = _PLACE.match(lm.group("spelled") or "")
        if spelled:
            # inside a macro: at the macro's own text, where the mistake is written (the place
            # of its use showed no typo), the use named after the message
            msg += f" (in a macro used at {file}:{line}:{col})"
            file, line = spelled.group("file"), int(spelled.group("line"))
            col = int(spelled.group("col") or 1)
        found.append(Diagnostic(file, line, col, ERROR if sev == "error" else WARNING,
                                code, msg, layer))
    return found


def warning_diagnostics(warnings: str, layer: str) -> list[Diagnostic]:
    """The compiler's warnings of a program that builds (CL082, at the user's lines)."""
    return [d for d in log_line_diagnostics(warnings, layer, "CL082") if d.severity == WARNING]
