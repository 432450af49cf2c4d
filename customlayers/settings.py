"""Every environment variable the package reads, with its default. Nothing else reads os.environ.

CUSTOMLAYERS_CACHE_DIR   where compiled programs are cached (default: the user's cache directory,
                         e.g. ~/.cache/customlayers)
CUSTOMLAYERS_NO_CACHE    "1" turns the disk cache off (the in-memory cache stays)
CUSTOMLAYERS_VERBOSE     "1" reports each cache hit and miss and each build on stderr
CUSTOMLAYERS_DEVICE      default device selector (CPU, GPU, or part of a device name)
"""
from __future__ import annotations

import os
from pathlib import Path


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> Path:
    value = os.environ.get("CUSTOMLAYERS_CACHE_DIR")
    if value:
        return Path(value)
    import platformdirs
    return Path(platformdirs.user_cache_dir("customlayers"))


def cache_enabled() -> bool:
    return not _flag("CUSTOMLAYERS_NO_CACHE")


def verbose() -> bool:
    return _flag("CUSTOMLAYERS_VERBOSE")


def default_device() -> str | None:
    return os.environ.get("CUSTOMLAYERS_DEVICE") or None
