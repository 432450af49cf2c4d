"""A package's NVIDIA machine code (runtime/package/machine_code.py): which part names may
reach the disk, and how they are put into the driver's cache folder. No device needed: the
files are bytes here; tests/device/test_package_machine_code.py loads packages with them."""
from __future__ import annotations

import threading

import pytest

from customlayers.errors import PackageError
from customlayers.runtime.device import device as device_module
from customlayers.runtime.package.machine_code import (PART_PREFIX, install_machine_code,
                                                       is_cache_path)


@pytest.mark.parametrize("rel", ["0/0/fe582459662c90", "c/2/4e46cdfc39972f", "a", "x_y-1/z.bin"])
def test_the_driver_cache_file_names_are_taken(rel):
    assert is_cache_path(rel)


@pytest.mark.parametrize("rel", ["", "index", "../x", "a/../b", "/etc/passwd", "a//b", "a/./b",
                                 ".hidden/x", "a/b/c/d/e", "a\\b", "a b", "x" * 65, "a/\x00"])
def test_other_names_are_refused(rel):
    assert not is_cache_path(rel)


def parts(**files):
    return {PART_PREFIX + rel.replace("__", "/"): data for rel, data in files.items()}


def fresh_process(monkeypatch):
    """As in a process that has not listed the OpenCL platforms yet: the driver's folder is
    read from the environment at the next listing (device.driver_cache_folder)."""
    monkeypatch.setattr(device_module, "_driver_cache", [])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "nv"
    monkeypatch.setenv("CUDA_CACHE_PATH", str(folder))
    monkeypatch.delenv("CUDA_CACHE_DISABLE", raising=False)
    monkeypatch.delenv("CUSTOMLAYERS_NO_MACHINE_CODE", raising=False)
    fresh_process(monkeypatch)
    return folder


def test_files_go_into_cuda_cache_path_and_existing_ones_are_kept(cache):
    (cache / "0" / "1").mkdir(parents=True)
    (cache / "0" / "1" / "kept").write_bytes(b"the driver's own")
    written = install_machine_code({**parts(a__b__c1=b"one", d__e__f2=b"two",
                                            **{"0__1__kept": b"ours"}),
                                    "graph": b"not machine code"}, True)
    assert written == 2
    assert (cache / "a" / "b" / "c1").read_bytes() == b"one"
    assert (cache / "d" / "e" / "f2").read_bytes() == b"two"
    assert (cache / "0" / "1" / "kept").read_bytes() == b"the driver's own"
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == ["c1", "f2", "kept"]


def test_the_default_folder_is_under_home(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    monkeypatch.delenv("CUDA_CACHE_DISABLE", raising=False)
    monkeypatch.delenv("CUSTOMLAYERS_NO_MACHINE_CODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    fresh_process(monkeypatch)
    assert install_machine_code(parts(a__b=b"1"), True) == 1
    assert (tmp_path / ".nv" / "ComputeCache" / "a" / "b").read_bytes() == b"1"


@pytest.mark.parametrize("variable", ["CUDA_CACHE_DISABLE", "CUSTOMLAYERS_NO_MACHINE_CODE"])
def test_nothing_is_written_where_the_cache_is_off_or_the_code_unwanted(cache, monkeypatch,
                                                                        variable):
    monkeypatch.setenv(variable, "1")
    fresh_process(monkeypatch)
    assert install_machine_code(parts(a__b=b"1"), True) == 0
    assert not cache.exists()


def test_a_name_outside_the_cache_form_is_refused_and_nothing_written(cache, tmp_path):
    with pytest.raises(PackageError) as e:
        install_machine_code({PART_PREFIX + "ok": b"1", PART_PREFIX + "../escape": b"2"}, True)
    assert e.value.part == PART_PREFIX + "../escape"
    assert "not named as a file of the driver's cache" in str(e.value)
    assert not cache.exists() and not (tmp_path / "escape").exists()


def test_a_folder_that_cannot_be_written_is_one_notice(cache):
    cache.parent.mkdir(exist_ok=True)
    cache.write_bytes(b"a file where the folder should be")
    said = []
    assert install_machine_code(parts(a__b=b"1"), True, said.append) == 0
    assert len(said) == 1 and "could not be written" in said[0] and str(cache) in said[0]
    assert "CUDA_CACHE_PATH" in said[0]


def test_the_folder_is_the_one_named_when_opencl_started(cache, tmp_path, monkeypatch):
    device_module.list_devices()          # the driver reads CUDA_CACHE_PATH now, and only now
    monkeypatch.setenv("CUDA_CACHE_PATH", str(tmp_path / "later"))
    assert install_machine_code(parts(a__b=b"1"), True) == 1
    assert (cache / "a" / "b").read_bytes() == b"1" and not (tmp_path / "later").exists()


def test_a_link_out_of_the_folder_is_not_followed(cache, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    cache.mkdir()
    (cache / "0").symlink_to(outside, target_is_directory=True)
    said = []
    assert install_machine_code(parts(**{"0__a__b": b"1"}), True, said.append) == 0
    assert not any(outside.rglob("*"))
    assert len(said) == 1 and "is a link out of the folder" in said[0]
    (cache / "1").mkdir()
    (cache / "1" / "c").symlink_to(outside / "target")
    assert install_machine_code(parts(**{"1__c": b"2"}), True, said.append) == 0
    assert not (outside / "target").exists()        # a link where a file would go: kept


def test_files_are_whole_and_readable_by_all_when_several_install_at_once(cache):
    code = {f"{i % 4}__{i}__{i:014x}": bytes([i]) * (1000 + i) for i in range(40)}
    threads = [threading.Thread(target=install_machine_code, args=(parts(**code), True))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = {p.relative_to(cache).as_posix(): p for p in cache.rglob("*") if p.is_file()}
    assert set(found) == {rel.replace("__", "/") for rel in code}      # no temporary left
    for rel, data in code.items():
        path = found[rel.replace("__", "/")]
        assert path.read_bytes() == data and path.stat().st_mode & 0o777 == 0o644


def test_nothing_is_written_for_a_device_of_another_platform(cache):
    # PoCL's binaries are its machine code; its CUDA device is NVIDIA's but not its driver's
    assert install_machine_code(parts(a__b=b"1"), False) == 0
    assert not cache.exists()
