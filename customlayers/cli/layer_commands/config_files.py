"""Which config files `validate`'s arguments name.

- a config file: itself;
- a folder: every `*.xml` under it (recursively, hidden folders skipped) that holds a
  `<CustomLayer` element; other XML (models, build files) is not a config and is skipped;
- an OpenCL source (`.cl`): the configs under the current folder whose `<Source filename>`
  resolves to it, so that a commit that changes only a kernel re-checks the layers built from
  it (the pre-commit hook runs from the repository's root);
- a model (an IR `.xml` whose root is `<net>`, `.onnx`, `.bin`): a usage error, since a model is
  checked with its layers by `run`, not by `validate`. The commands that take configs with -c
  (run, benchmark, run-layer, check, jit, layers) refuse a model the same way
  (`refuse_models_as_configs`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from ...config import Diagnostics
from ...config.limits import MAX_CONFIG_BYTES
from ...files import open_user_file, read_user_file
from ...config.xmlload import parse_document

MODEL_SUFFIXES = (".onnx", ".bin")
CONFIG_MARK = b"<CustomLayer"


@dataclass
class ConfigTargets:
    configs: list[str] = field(default_factory=list)   # in argument order, each once
    notes: list[str] = field(default_factory=list)     # for stderr: what an argument gave
    # .cl arguments that cannot be read: (path, why), reported as CL000 (exit 2)
    unreadable: list[tuple[str, str]] = field(default_factory=list)

    def add(self, path: str) -> None:
        if path not in self.configs:
            self.configs.append(path)


def is_model(path: str) -> bool:
    """An ONNX model or IR weights by suffix, or an XML file whose first element is an IR's
    <net>. Parsed without entities, DTD or network, and only up to its first element."""
    p = Path(path)
    if p.suffix.lower() in MODEL_SUFFIXES:
        return True
    if p.suffix.lower() != ".xml":
        return False
    try:
        # a file object, not the name: lxml takes a name as UTF-8, which a file name need not
        # be; and only a regular file (a FIFO would block)
        with open_user_file(p) as f:
            for _, element in etree.iterparse(f, events=("start",), resolve_entities=False,
                                              no_network=True, load_dtd=False):
                return element.tag == "net"
    except (etree.XMLSyntaxError, OSError):
        return False     # not well-formed (a config without a root is not, either): not an IR
    return False


def refuse_models_as_configs(paths, option: str = "-c") -> None:
    """A UsageError naming the first of `paths` that is a model, not a layer config (a user who
    swapped -m and -c would otherwise read XML or UTF-8 errors about a protobuf file)."""
    from .. import UsageError
    for path in paths:
        if is_model(path):
            raise UsageError(f"{option} {path}: this is a model, not a layer config; give a model "
                             f"with -m and its layers' configs with -c (`customlayers run -m "
                             f"{path} -c CONFIG`)")


def is_config(path: Path) -> bool:
    """Whether an .xml file holds a <CustomLayer> element (a broken one counts: validate says
    what is wrong with it)."""
    try:
        return CONFIG_MARK in read_user_file(path, MAX_CONFIG_BYTES)
    except OSError:                 # a FIFO, a device, too large: not a config we read
        return False


def configs_under(folder: str) -> list[str]:
    """The config files under `folder`, sorted, hidden folders (.git, .venv) skipped."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(".xml") and is_config(Path(root, name)):
                found.append(os.path.join(root, name))
    return found


def sources_named(config: str) -> set[str]:
    """The real paths of the Source files a config names (resolved against its folder)."""
    try:
        data = read_user_file(config, MAX_CONFIG_BYTES)
    except OSError:
        return set()
    doc = parse_document(data, config, Diagnostics())
    if doc is None:
        return set()
    base = os.path.dirname(os.path.abspath(config))
    named = set()
    for layer in doc.nodes:
        for kernel in layer.find_all("Kernel"):
            for source in kernel.find_all("Source"):
                filename = source.attrs.get("filename")
                if filename:
                    named.add(os.path.realpath(os.path.join(base, filename)))
    return named


def expand(arguments: list[str], search_root: str = ".") -> ConfigTargets:
    """The config files `arguments` name (see the module's text); UsageError for a model."""
    from .. import UsageError
    targets = ConfigTargets()
    configs_in_root: list[str] | None = None
    for arg in arguments:
        if os.path.isdir(arg):
            found = configs_under(arg)
            if not found:
                targets.notes.append(f"{arg}: no layer config (*.xml with a <CustomLayer> "
                                     f"element) in this folder")
            for path in found:
                targets.add(path)
        elif arg.lower().endswith(".cl"):
            if not os.path.isfile(arg):
                targets.unreadable.append((arg, "No such file or directory"
                                           if not os.path.exists(arg) else "not a file"))
            if configs_in_root is None:
                configs_in_root = configs_under(search_root)
            wanted = os.path.realpath(arg)
            naming = [c for c in configs_in_root if wanted in sources_named(c)]
            if not naming and os.path.isfile(arg):
                targets.notes.append(f"{arg}: no config under {os.path.abspath(search_root)} "
                                     f"names this source; nothing to check for it")
            for path in naming:
                targets.add(path)
        elif is_model(arg):
            raise UsageError(f"{arg} is a model, not a layer config; to check a model with its "
                             f"layers use `run -m {arg} -c CONFIG`")
        else:
            targets.add(arg)      # a config, or a file that cannot be read (reported as CL000)
    return targets
