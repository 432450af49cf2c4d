"""Typos that used to pass unnoticed: an unknown Define type (the value check was skipped) and a
parameter no Define reads (the layer ran with its default)."""
from __future__ import annotations

import pytest

from customlayers.cli import main
from customlayers.config import load_config_string
from customlayers.config.codes import CODES
from customlayers.config.simplegpu.params import unused_params, unused_params_message

KERNEL = {"k.cl": "__kernel void k(const __global float* a, __global float* o) {}\n"}
LAYER = """<CustomLayer name="Swish" type="SimpleGPU" version="1">
  <Kernel entry="k">
    <Source filename="k.cl"/>
    {defines}
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""


def diags(defines: str):
    configs = load_config_string(LAYER.format(defines=defines), KERNEL)
    return configs, [(d.line, d.column, d.code, d.message) for d in configs.diagnostics]


@pytest.mark.parametrize("written, hint", [
    ("flaot", " (did you mean 'float'?)"),
    ("Float", " (did you mean 'float'?)"),
    ("int []", " (did you mean 'int[]'?)"),
    ("double", " (did you mean 'float'?)"),
    ("uint[]", " (did you mean 'int[]'?)"),
    ("vector", ""),
])
def test_unknown_define_type_is_an_error_naming_the_accepted_ones(written, hint):
    configs, found = diags(f'<Define name="BETA" type="{written}" param="beta" default="1"/>')
    assert found == [(4, 25, "CL052", f"Define 'BETA': type '{written}' is not one of int, "
                                      f"float, int[], float[]{hint}")]
    assert configs.layers == {} and "CL052" in CODES


@pytest.mark.parametrize("written", ["int", "float", "int[]", "float[]"])
def test_the_four_accepted_types_validate(written):
    configs, found = diags(f'<Define name="A" type="{written}" default="1"/>')
    assert found == [] and configs.layers["Swish"].defines[0].type == written


def test_a_define_without_type_takes_any_text_as_before():
    configs, found = diags('<Define name="ACC" default="float"/>')
    assert found == [] and "Swish" in configs.layers


def test_the_value_is_still_checked_when_the_type_is_wrong():
    # control characters are refused whatever the type: the wrong type must not hide that
    _, found = diags('<Define name="A" type="flaot" default="1&#10;#error x"/>')
    assert [code for _, _, code, _ in found] == ["CL052", "CL050"]


def test_validate_cli_reports_the_typo_and_exits_1(tmp_path, capsys):
    (tmp_path / "k.cl").write_text(KERNEL["k.cl"])
    (tmp_path / "c.xml").write_text(LAYER.format(
        defines='<Define name="BETA" type="flaot" param="beta" default="1.0"/>'))
    assert main(["validate", str(tmp_path / "c.xml")]) == 1
    out = capsys.readouterr().out
    assert (f"{tmp_path / 'c.xml'}:4:25: error[CL052]: Define 'BETA': type 'flaot' is not one "
            f"of int, float, int[], float[] (did you mean 'float'?) (layer Swish)") in out


def _spec(defines: str):
    return load_config_string(LAYER.format(defines=defines), KERNEL).layers["Swish"]


def test_unused_params_lists_nearest_names_first():
    spec = _spec('<Define name="BETA" type="float" param="beta" default="1"/>'
                 '<Define name="BIAS" type="float" param="bias" default="0"/>'
                 '<Define name="N 3"/>')
    assert unused_params(spec, {"beta": "2", "bias": "1"}) == []
    assert unused_params(spec, {"bta": "1.5", "zzz": "1", "beta": "2"}) == [
        ("bta", ["beta", "bias"]), ("zzz", [])]
    message = unused_params_message(spec, unused_params(spec, ["bta"]))
    assert message.startswith("layer 'Swish' does not use the parameter 'bta' (did you mean "
                              "'beta' or 'bias'?); it uses beta, bias (<string>:1:1)")


def test_a_layer_without_params_uses_none():
    spec = _spec("")
    assert unused_params(spec, {"beta": "1"}) == [("beta", [])]
    assert "it uses no attribute" in unused_params_message(spec, [("beta", [])])
