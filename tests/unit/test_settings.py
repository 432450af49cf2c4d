"""settings.py: a bad environment value (or tuning argument) is a ConfigError that names the
variable or argument and the values it takes, raised by settings.py itself, so every caller
(Network, Tuner, device_traits, the CLI) reports it as one line without wrapping it."""
import os

import pytest

from customlayers import settings
from customlayers.errors import ConfigError


def test_tuning_mode_takes_the_argument_then_the_variable_then_fast(monkeypatch):
    monkeypatch.delenv("CUSTOMLAYERS_TUNING", raising=False)
    assert settings.tuning_mode() == "fast"
    monkeypatch.setenv("CUSTOMLAYERS_TUNING", " Full ")
    assert settings.tuning_mode() == "full"
    assert settings.tuning_mode("off") == "off"


def test_a_bad_tuning_variable_is_a_config_error_naming_it(monkeypatch):
    monkeypatch.setenv("CUSTOMLAYERS_TUNING", "fastest")
    with pytest.raises(ConfigError, match=r"CUSTOMLAYERS_TUNING='fastest' is not one of off, "
                                          r"fast, full; unset it \(fast\), or set it to one"):
        settings.tuning_mode()


def test_a_bad_tuning_argument_is_a_config_error_naming_the_argument(monkeypatch):
    """The argument is checked, not the variable (which is fine here)."""
    monkeypatch.setenv("CUSTOMLAYERS_TUNING", "off")
    with pytest.raises(ConfigError, match=r"tuning='quick' is not one of off, fast, full: "
                                          r"pass one of them"):
        settings.tuning_mode("quick")


@pytest.mark.parametrize("value", ["12", "abc", "8.0"])
def test_a_bad_cpu_vector_width_is_a_config_error_naming_it(monkeypatch, value):
    monkeypatch.setenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", value)
    with pytest.raises(ConfigError, match=rf"CUSTOMLAYERS_CPU_VECTOR_WIDTH='{value}' is not 8 "
                                          r"or 16; unset it \(the device's width\), or set it "
                                          r"to 8 \(AVX2 kernels\) or 16 \(AVX-512\)"):
        settings.cpu_vector_width()


def test_cpu_vector_width_is_none_unset_and_the_number_set(monkeypatch):
    monkeypatch.delenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", raising=False)
    assert settings.cpu_vector_width() is None
    monkeypatch.setenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", "8")
    assert settings.cpu_vector_width() == 8


def test_keep_binaries_is_none_unset_then_the_flag(monkeypatch):
    monkeypatch.delenv("CUSTOMLAYERS_KEEP_BINARIES", raising=False)
    assert settings.keep_binaries() is None
    monkeypatch.setenv("CUSTOMLAYERS_KEEP_BINARIES", "1")
    assert settings.keep_binaries() is True
    monkeypatch.setenv("CUSTOMLAYERS_KEEP_BINARIES", " 0 ")
    assert settings.keep_binaries() is False


@pytest.mark.parametrize("value", ["yes", "2", "true"])
def test_a_bad_keep_binaries_is_a_config_error_naming_it(monkeypatch, value):
    monkeypatch.setenv("CUSTOMLAYERS_KEEP_BINARIES", value)
    with pytest.raises(ConfigError, match=rf"CUSTOMLAYERS_KEEP_BINARIES='{value}' is not 0 or "
                                          r"1; unset it \(by device\), or set 1"):
        settings.keep_binaries()


@pytest.mark.parametrize("name,read", [
    ("POCL_KERNEL_CACHE", settings.pocl_kernel_cache_on),
    ("POCL_WORK_GROUP_SPECIALIZATION", settings.pocl_specializes_work_groups)])
def test_pocl_booleans_are_read_as_pocl_reads_them(monkeypatch, name, read):
    """Unset: on (PoCL's default); set: on only for a value that starts with "1"."""
    monkeypatch.delenv(name, raising=False)
    assert read()
    for value, on in (("1", True), ("1 ", True), ("0", False), ("", False), ("false", False),
                      ("yes", False), ("2", False)):
        monkeypatch.setenv(name, value)
        assert read() is on, value


def test_an_engine_on_pocl_leaves_a_users_specialization_setting(monkeypatch):
    monkeypatch.delenv("POCL_WORK_GROUP_SPECIALIZATION", raising=False)
    settings.prefer_pocl_generic_work_groups()
    assert os.environ["POCL_WORK_GROUP_SPECIALIZATION"] == "0"
    monkeypatch.setenv("POCL_WORK_GROUP_SPECIALIZATION", "")     # the user's: PoCL reads off
    settings.prefer_pocl_generic_work_groups()
    assert os.environ["POCL_WORK_GROUP_SPECIALIZATION"] == ""
