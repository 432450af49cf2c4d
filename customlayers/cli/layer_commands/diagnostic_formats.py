"""`validate --format`: the same diagnostics as text, JSON, SARIF 2.1.0 or GitHub annotations.

- text: `file:line:col: severity[CODE]: message (layer NAME)` (`file: ...` for a problem of
  the whole file, such as one that cannot be read), then the summary line;
- json: one array of {file, line, column, severity, code, layer, message};
- sarif: one SARIF 2.1.0 log (for code-scanning uploads): the rules are our stable codes
  (config/codes.py), each result has its ruleId, level, message and place;
- github: workflow commands (`::error file=F,line=L,col=C,title=CODE::message`), which GitHub
  Actions turns into annotations on the changed lines.

For the machine formats stdout holds exactly that output, and the summary goes to stderr.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from ...config import Diagnostic
from ...config.codes import CODES
from ...config.diagnostics import ERROR, INFO, WARNING

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {ERROR: "error", WARNING: "warning", INFO: "note"}
GITHUB_COMMAND = {ERROR: "error", WARNING: "warning", INFO: "notice"}


def _text(diags: list[Diagnostic]) -> str:
    return "\n".join(d.render() for d in diags)


def _json(diags: list[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diags], indent=2)


def _relative(file: str) -> str | None:
    """`file` relative to the current folder (the repository's root in CI) with forward
    slashes, as GitHub and code scanning match paths to the repository's files; None when it
    lies outside (or on another drive). Diagnostics name configs as given and .cl sources by
    their absolute paths: both come out the same way."""
    path = Path(file).resolve()
    try:
        relative = Path(os.path.relpath(path, Path.cwd().resolve()))
    except ValueError:        # another drive (Windows): no relative path exists
        return None
    return None if relative.parts[:1] == ("..",) else relative.as_posix()


def _uri(file: str) -> str:
    """The path relative to the current folder; else a file: URI."""
    return _relative(file) or Path(file).resolve().as_uri()


def _message(d: Diagnostic) -> str:
    return f"{d.message} (layer {d.layer})" if d.layer else d.message


def sarif_log(diags: list[Diagnostic], version: str) -> dict:
    """The SARIF 2.1.0 log of `diags` as a dict."""
    codes = list(CODES)
    rules = [{"id": code, "shortDescription": {"text": text},
              "fullDescription": {"text": text}} for code, text in CODES.items()]
    results = []
    for d in diags:
        location: dict = {"artifactLocation": {"uri": _uri(d.file)}}
        if d.line >= 1:       # line 0 means the file as a whole: no region
            location["region"] = {"startLine": d.line, "startColumn": max(d.column, 1)}
        result = {"ruleId": d.code, "level": SARIF_LEVEL.get(d.severity, "note"),
                  "message": {"text": _message(d)},
                  "locations": [{"physicalLocation": location}]}
        if d.code in CODES:
            result["ruleIndex"] = codes.index(d.code)
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "customlayers", "version": version,
                                "semanticVersion": version, "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(diags: list[Diagnostic]) -> str:
    lines = []
    for d in diags:
        props = [f"file={_escape_property(_relative(d.file) or d.file)}"]
        if d.line >= 1:
            props += [f"line={d.line}", f"col={max(d.column, 1)}"]
        props.append(f"title={_escape_property(d.code)}")
        lines.append(f"::{GITHUB_COMMAND.get(d.severity, 'notice')} {','.join(props)}::"
                     f"{_escape_data(_message(d))}")
    return "\n".join(lines)


def render(fmt: str, diags: list[Diagnostic], version: str) -> str:
    """The diagnostics in format `fmt` (one of FORMATS), without the summary."""
    if fmt == "sarif":
        return json.dumps(sarif_log(diags, version), indent=2)
    return _RENDERERS[fmt](diags)


_RENDERERS: dict[str, Callable[[list[Diagnostic]], str]] = {
    "text": _text, "json": _json, "github": _github}
FORMATS = ("text", "json", "sarif", "github")
