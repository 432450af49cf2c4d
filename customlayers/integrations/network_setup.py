"""A Network from what a user names on the command line: model, configs (-c), Python layers
(-l), device (-d), tuning, and the program cache's directory (-cdir).

One function, so that a Ray actor, a Serve replica and the plain loop a test compares them with
build the same network the same way.
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Sequence

from ..errors import CustomLayersError
from ..runtime.cache import ProgramCache
from ..runtime.device import Engine
from ..runtime.network import Network
from ..runtime.registry import Registry


class UnsupportedOptionError(CustomLayersError, TypeError):
    """An option this version of the runtime does not have (Python layers, tuning)."""


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
    python_paths = _paths(python_layers)
    if python_paths:
        load_python = getattr(registry, "load_python", None)
        if load_python is None:
            raise UnsupportedOptionError(
                f"python_layers={python_paths}: this version of customlayers cannot load CPU "
                f"layers written in Python (Registry.load_python); update it, or leave "
                f"python_layers out")
        for path in python_paths:
            load_python(path)
    options = {}
    if tuning is not None:
        # the runtime's kernel tuning is newer than this module: pass it on only where the
        # Network takes it, and say so where it does not (never drop it silently)
        if "tuning" not in inspect.signature(Network.__init__).parameters:
            raise UnsupportedOptionError(
                f"tuning={tuning!r}: this version's Network has no kernel tuning; leave "
                f"tuning out")
        options["tuning"] = tuning
    if isinstance(model, Path):
        model = str(model)
    return Network(model, registry, engine, **options)
