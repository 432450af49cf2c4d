"""The program cache key covers everything that changes the binary (STYLE 8): each field of the
device identity, our version, the options and the source. Fake device objects: no OpenCL."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from customlayers.runtime.device import cache

BASE = {"platform_name": "Portable Computing Language", "platform_version": "OpenCL 3.0 PoCL 3.1",
        "device_name": "cpu-x86", "device_version": "OpenCL 3.0 PoCL", "driver": "3.1"}


def fake_device(**fields):
    f = {**BASE, **fields}
    platform = SimpleNamespace(name=f["platform_name"], version=f["platform_version"])
    return SimpleNamespace(platform=platform, name=f["device_name"],
                           version=f["device_version"], driver_version=f["driver"])


def key(source="__kernel void k() {}", options="-cl-mad-enable", device=None):
    return cache.cache_key(source, options, device or fake_device())


def test_the_same_inputs_give_the_same_key():
    assert key() == key()
    assert key(device=fake_device(device_name="cpu-x86  ")) == key()   # names are stripped


@pytest.mark.parametrize("field", sorted(BASE))
def test_each_device_field_changes_the_key(field):
    assert key(device=fake_device(**{field: BASE[field] + "-other"})) != key()


def test_source_options_and_our_version_change_the_key(monkeypatch):
    base = key()
    assert key(source="__kernel void k() { }") != base
    assert key(options="") != base
    monkeypatch.setattr(cache, "__version__", cache.__version__ + ".post1")
    assert key() != base


def test_fields_do_not_run_into_each_other():
    # length-prefixed parts: moving text from the source into the options is another key
    assert key(source="ab", options="c") != key(source="a", options="bc")
