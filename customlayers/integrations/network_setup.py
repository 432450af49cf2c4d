"""A Network from what a user names on the command line: model, configs (-c), Python layers
(-l), device (-d), tuning, and the program cache's directory (-cdir).

One function, so that a Ray actor, a Serve replica and the plain loop a test compares them with
build the same network the same way.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..runtime.device.cache import ProgramCache
from ..runtime.device.device import Engine
from ..runtime.compile.network import Network
from ..runtime.layers.registry import Registry


def _paths(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, Path)):
        return [str(value)]
    return [str(v) for v in value]


def build_network(model, configs: Sequence | str | None = (),
                  python_layers: Sequence | str | None = (), device=None, tuning=None,
                  cache_dir: str | Path | None = None) -> Network:
    """The Network of `model` with the custom layers of `configs` (descriptor XML files) and
    `python_layers` (.py files of CPU layers), on `device` (a selector, or a pyopencl
    Device), building programs through the on-disk cache in `cache_dir` (default:
    CUSTOMLAYERS_CACHE_DIR, else the user's cache directory)."""
    cache = ProgramCache(directory=Path(cache_dir)) if cache_dir is not None else None
    engine = Engine(device, cache=cache)
    registry = Registry(engine)
    for path in _paths(configs):
        registry.load(path)
    for path in _paths(python_layers):
        registry.load_python(path)
    options = {"tuning": tuning} if tuning is not None else {}
    if isinstance(model, Path):
        model = str(model)
    return Network(model, registry, engine, **options)
