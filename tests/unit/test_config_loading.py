"""Loading valid configs: files and strings, multi-root and container roots, every element of
SPEC section 2 kept, several configs into one ConfigSet."""
from __future__ import annotations

from pathlib import Path

import pytest

from customlayers.config import ConfigSet, load_config_string, load_configs

DATA = Path(__file__).resolve().parent.parent / "data" / "configs"

RELU_CL = "__kernel void relu(const __global float* in, __global float* out) { }\n"


def layer_xml(name="ReLU", entry="relu", source="relu.cl", extra="") -> str:
    return f"""<CustomLayer name="{name}" type="SimpleGPU" version="1">
  <Kernel entry="{entry}">
    <Source filename="{source}"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>{extra}
</CustomLayer>
"""


def test_multi_root_file_with_declaration_and_comments():
    configs = load_configs([DATA / "good" / "multi_root.xml"])
    assert list(configs.diagnostics) == []
    assert list(configs.layers) == ["ReLU", "ScaleShift"]
    relu = configs.layers["ReLU"]
    assert relu.location.line == 3 and relu.location.column == 1
    assert relu.entry == "example_relu_kernel"
    assert relu.sources[0].path == str(DATA / "good" / "relu.cl")
    assert "example_relu_kernel" in relu.sources[0].text
    (define,) = relu.defines
    assert (define.name, define.param, define.type, define.default) == \
        ("neg_slope", "negative_slope", "float", "0.0f")
    assert define.location.line == 6
    assert [(t.arg_index, t.kind, t.port_index, t.format) for t in relu.tensors] == \
        [(0, "input", 0, "BFYX"), (1, "output", 0, "BFYX")]  # lower-case bfyx normalised
    assert relu.work_sizes.global_ == ("B*F*Y*X",)
    assert relu.config_path == str(DATA / "good" / "multi_root.xml")


def test_every_element_kept_in_order():
    spec = load_configs([DATA / "good" / "multi_root.xml"]).layers["ScaleShift"]
    assert [s.filename for s in spec.sources] == ["scale_shift.cl", "scale_shift_main.cl"]
    assert [d.name for d in spec.defines] == ["HAS_BIAS 1", "SCALES"]
    assert [(d.name, d.arg_index) for d in spec.data] == [("weights", 1), ("biases", 2)]
    assert spec.outputs[0].format == "ANY" and spec.inputs[0].format == "BFYX"
    assert spec.compiler_options == ("-cl-mad-enable", "-cl-fast-relaxed-math")
    assert spec.options == "-cl-mad-enable -cl-fast-relaxed-math"
    ws = spec.work_sizes
    assert (ws.global_, ws.local, ws.dim) == (("X", "Y", "B*F"), ("1", "1", "1"), ("input", 0))
    assert ws.location.line == 31
    assert spec.num_args == 4


def test_container_root_and_optional_tensor_shape():
    configs = load_configs([DATA / "good" / "container.xml"])
    assert list(configs.diagnostics) == []
    spec = configs.layers["ReLU"]
    assert spec.location.line == 4 and spec.location.column == 3
    assert spec.outputs[0].shape == "B,F,Y*2,X*2"
    assert spec.work_sizes.dim == ("input", 0)
    assert spec.defines[0].default == "1e-7"  # kept exactly as written


@pytest.mark.parametrize("dim, expected", [("output", ("output", 0)), ("input", ("input", 0)),
                                           ("input,1", ("input", 1)), ("input 1", ("input", 1))])
def test_dim_spellings(dim, expected):
    xml = layer_xml(extra=f'\n  <WorkSizes dim="{dim}"/>').replace(
        '<Tensor arg-index="1" type="output"',
        '<Tensor arg-index="2" type="input" port-index="1"/>\n'
        '    <Tensor arg-index="1" type="output"')
    configs = load_config_string(xml, {"relu.cl": RELU_CL})
    assert configs.diagnostics.errors == []
    assert configs.layers["ReLU"].work_sizes.dim == expected


def test_string_with_source_mapping_and_bytes():
    configs = load_config_string(layer_xml().encode(), {"relu.cl": RELU_CL}, name="mem.xml")
    assert list(configs.diagnostics) == []
    spec = configs.layers["ReLU"]
    assert spec.sources[0].path is None and spec.sources[0].text == RELU_CL
    assert spec.config_path is None and spec.location.file == "mem.xml"
    assert configs.files == ["mem.xml"]


def test_declared_encoding_and_bom_are_honoured():
    xml = ('<?xml version="1.0" encoding="ISO-8859-1"?>\n<!-- caf\xe9 -->\n' + layer_xml())
    configs = load_config_string(xml.encode("latin-1"), {"relu.cl": RELU_CL})
    assert list(configs.diagnostics) == [] and "ReLU" in configs.layers
    configs = load_config_string(b"\xef\xbb\xbf" + layer_xml().encode(), {"relu.cl": RELU_CL})
    assert list(configs.diagnostics) == [] and configs.layers["ReLU"].location.line == 1


def test_later_definition_wins_with_a_warning_naming_both_places():
    configs = load_config_string(layer_xml(), {"relu.cl": RELU_CL}, name="a.xml")
    load_config_string("\n\n" + layer_xml(entry="relu2"),
                       {"relu.cl": RELU_CL.replace("relu(", "relu2(")}, name="b.xml",
                       into=configs)
    assert configs.files == ["a.xml", "b.xml"]
    assert configs.layers["ReLU"].entry == "relu2"
    (warning,) = configs.diagnostics
    assert (warning.file, warning.line, warning.code, warning.severity) == \
        ("b.xml", 3, "CL070", "warning")
    assert "a.xml:1:1" in warning.message


def test_several_files_into_one_set(tmp_path):
    for name in ("one", "two"):
        (tmp_path / f"{name}.cl").write_text(RELU_CL.replace("relu(", f"{name}("))
        (tmp_path / f"{name}.xml").write_text(layer_xml(name=name.title(), entry=name,
                                                        source=f"{name}.cl"))
    configs = ConfigSet()
    load_configs([tmp_path / "one.xml"], into=configs)
    load_configs(str(tmp_path / "two.xml"), into=configs)
    assert sorted(configs.layers) == ["One", "Two"]
    assert len(configs.files) == 2 and list(configs.diagnostics) == []


def test_missing_config_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        load_configs([tmp_path / "absent.xml"])


def test_kernel_found_after_attributes_and_not_in_comments():
    src = ("/* __kernel void relu(int x) */\n// kernel void relu(\n"
           "__kernel __attribute__((reqd_work_group_size(8, 1, 1))) void relu(__global float*a)"
           "{}\n")
    configs = load_config_string(layer_xml(), {"relu.cl": src})
    assert list(configs.diagnostics) == []
    only_comment = "/* __kernel void relu(int x) */\nvoid helper(void) {}\n"
    configs = load_config_string(layer_xml(), {"relu.cl": only_comment})
    assert [d.code for d in configs.diagnostics] == ["CL044"]
