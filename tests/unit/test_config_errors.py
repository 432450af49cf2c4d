"""Every problem is reported at its file:line with a stable code; a layer with an error is left
out of .layers. The codes are pinned here with the line they must point at."""
from __future__ import annotations

from pathlib import Path

import pytest

from customlayers.config import load_config_string, load_configs
from customlayers.config.codes import CODES

DATA = Path(__file__).resolve().parent.parent / "data" / "configs"
KERNEL = "__kernel void k(const __global float* in, __global float* out) { }\n"


def found(configs):
    return [(d.line, d.code) for d in configs.diagnostics]


def test_ten_mistakes_all_reported_at_their_lines():
    path = DATA / "bad" / "ten_mistakes.xml"
    configs = load_configs([path])
    got = [(d.line, d.code, d.severity, d.layer) for d in configs.diagnostics]
    assert got == [
        (2, "CL021", "error", "Broken"),      # version="2"
        (5, "CL040", "error", "Broken"),      # no_such_file.cl
        (6, "CL050", "error", "Broken"),      # float default "fast"
        (7, "CL013", "error", "Broken"),      # Define without name
        (10, "CL023", "error", "Broken"),     # format "Bfyx"
        (11, "CL030", "error", "Broken"),     # arg-index 0 twice
        (11, "CL022", "error", "Broken"),     # type "inptu"
        (12, "CL024", "error", "Broken"),     # arg-index "x"
        (14, "CL060", "error", "Broken"),     # "(B*F" unbalanced
        (14, "CL025", "error", "Broken"),     # dim "inputs"
        (15, "CL010", "warning", "Broken"),   # <Colour>
        (21, "CL031", "error", "Second"),     # arg-index gap (0, 2)
        (25, "CL061", "error", "Second"),     # 4 global entries
        (25, "CL062", "error", "Second"),     # local 3 vs global 4
        (27, "CL012", "error", "Third"),      # an MVCL layer without <Kernel>
        (28, "CL070", "warning", "Second"),   # Second again
        (32, "CL032", "error", "Second"),     # no output tensor
    ]
    assert len({code for _, code, _, _ in got}) >= 10
    assert configs.layers == {}
    assert all(d.file == str(path) for d in configs.diagnostics)


def test_messages_say_expected_and_found():
    configs = load_configs([DATA / "bad" / "ten_mistakes.xml"])
    text = {d.code: d.render() for d in configs.diagnostics}
    assert text["CL023"].endswith(
        ":10:55: error[CL023]: format 'Bfyx' is not one of BFYX, BYXF, YXFB, FYXB, ANY "
        "(or lower case) (layer Broken)")
    assert "<CustomLayer> has no <Kernel> element; expected at least one (layer Third)" \
        in text["CL012"]
    assert "version '2' is not '1'" in text["CL021"]
    assert "'fast' is not a float literal" in text["CL050"]
    assert "arg-index 0 is bound twice: <Tensor> here and <Tensor> at line 10" in text["CL030"]
    assert "kernel argument 1 is not bound" in text["CL031"] and "found 0, 2" in text["CL031"]
    assert "global 'X,Y,(B*F' does not parse" in text["CL060"]
    assert ":14:26:" in text["CL060"]  # column of the '(' inside global="X,Y,(B*F"
    assert "has 4 entries; expected at most 3" in text["CL061"]
    assert "unknown element <Colour> in <CustomLayer>" in text["CL010"]
    assert "replaces the one at" in text["CL070"] and ":17:1" in text["CL070"]


def make(body: str, *, name="L", type_="SimpleGPU", version="1", sources=None):
    xml = (f'<CustomLayer name="{name}" type="{type_}" version="{version}">\n{body}'
           f'</CustomLayer>\n')
    return load_config_string(xml, {"k.cl": KERNEL} if sources is None else sources)


KERNEL_OK = '<Kernel entry="k">\n<Source filename="k.cl"/>\n</Kernel>\n'
BUFFERS_OK = ('<Buffers>\n<Tensor arg-index="0" type="input" port-index="0"/>\n'
              '<Tensor arg-index="1" type="output" port-index="0"/>\n</Buffers>\n')


@pytest.mark.parametrize("body, expected", [
    # missing Kernel / Buffers / entry / Source / name of Data
    (BUFFERS_OK, [(1, "CL012")]),
    (KERNEL_OK, [(1, "CL012")]),
    ('<Kernel>\n<Source filename="k.cl"/>\n</Kernel>\n' + BUFFERS_OK, [(2, "CL013")]),
    ('<Kernel entry="k">\n</Kernel>\n' + BUFFERS_OK, [(2, "CL012")]),
    # wrong element name: unknown (warning) and the real one missing (error)
    ('<Kernal entry="k">\n<Source filename="k.cl"/>\n</Kernal>\n' + BUFFERS_OK,
     [(1, "CL012"), (2, "CL010")]),
    # unknown attribute
    (KERNEL_OK.replace('entry="k"', 'entry="k" colour="red"') + BUFFERS_OK, [(2, "CL011")]),
    # two Kernels
    (KERNEL_OK + KERNEL_OK + BUFFERS_OK, [(5, "CL014")]),
    # empty entry
    (KERNEL_OK.replace('entry="k"', 'entry=""') + BUFFERS_OK, [(2, "CL015")]),
    # port-index missing / negative
    (KERNEL_OK + BUFFERS_OK.replace(' port-index="0"/>\n<Tensor arg-index="1"',
                                    '/>\n<Tensor arg-index="1"'), [(6, "CL013")]),
    (KERNEL_OK + BUFFERS_OK.replace('port-index="0"/>\n</', 'port-index="-1"/>\n</'),
     [(7, "CL024")]),
    # the same port twice
    (KERNEL_OK + BUFFERS_OK.replace('</Buffers>', '<Tensor arg-index="2" type="output" '
                                    'port-index="0"/>\n</Buffers>'), [(8, "CL033")]),
    # dim beyond the inputs
    (KERNEL_OK + BUFFERS_OK + '<WorkSizes dim="input,1"/>\n', [(9, "CL034")]),
    # entry not among the kernels
    (KERNEL_OK.replace('entry="k"', 'entry="kk"') + BUFFERS_OK, [(2, "CL044")]),
    # define without value: a warning only
    (KERNEL_OK.replace('</Kernel>', '<Define name="TILES"/>\n</Kernel>') + BUFFERS_OK,
     [(4, "CL051")]),
    # define with its own value that does not fit its type
    (KERNEL_OK.replace('</Kernel>', '<Define name="N 3.5" type="int"/>\n</Kernel>')
     + BUFFERS_OK, [(4, "CL050")]),
    # local count different from the default global (one entry)
    (KERNEL_OK + BUFFERS_OK + '<WorkSizes local="8,1"/>\n', [(9, "CL062")]),
    # a shape formula that does not parse
    (KERNEL_OK + BUFFERS_OK.replace('port-index="0"/>\n</', 'port-index="0" shape="B,F,Y*"/>'
                                    '\n</'), [(7, "CL060")]),
    # a Data blob with a gap and no name
    (KERNEL_OK + BUFFERS_OK.replace('</Buffers>', '<Data arg-index="3"/>\n</Buffers>'),
     [(5, "CL031"), (8, "CL013")]),
    # a division or modulo by the number 0, whatever the shapes (a new user's Y/0 passed
    # validate and failed at run time)
    (KERNEL_OK + BUFFERS_OK + '<WorkSizes global="Y/0,F,B"/>\n', [(9, "CL060")]),
    (KERNEL_OK + BUFFERS_OK + '<WorkSizes global="X,Y,(B*F)%(0)"/>\n', [(9, "CL060")]),
    (KERNEL_OK + BUFFERS_OK.replace('port-index="0"/>\n</', 'port-index="0" shape="B,F,Y/0"/>'
                                    '\n</'), [(7, "CL060")]),
    # text inside an element: a doubled '/>' (a warning, at the element before it)
    (KERNEL_OK + BUFFERS_OK.replace('port-index="0"/>\n</', 'port-index="0"/>/>\n</'),
     [(7, "CL017")]),
])
def test_each_code_at_its_line(body, expected):
    configs = make(body)
    assert found(configs) == expected
    errors = [d for d in configs.diagnostics if d.severity == "error"]
    assert ("L" in configs.layers) == (not errors)
    assert all(d.code in CODES for d in configs.diagnostics)


def test_missing_layer_attributes_each_named():
    configs = load_config_string('<CustomLayer>\n' + KERNEL_OK + BUFFERS_OK + '</CustomLayer>',
                                 {"k.cl": KERNEL})
    assert found(configs) == [(1, "CL013")] * 3
    assert [d.message for d in configs.diagnostics] == [
        "<CustomLayer> has no 'name' attribute; it is required",
        "<CustomLayer> has no 'type' attribute; it is required",
        "<CustomLayer> has no 'version' attribute; it is required"]
    assert configs.layers == {}


def test_unknown_source_in_string_mapping_lists_given_names():
    configs = make(KERNEL_OK + BUFFERS_OK, sources={"other.cl": KERNEL})
    (d,) = configs.diagnostics
    assert (d.line, d.code) == (3, "CL040")
    assert "not among the given sources (given: other.cl)" in d.message


def test_unreadable_and_outside_sources(tmp_path):
    (tmp_path / "dir.cl").mkdir()
    (tmp_path / "bin.cl").write_bytes(b"__kernel void k() {}\n\xff\xfe")
    for name, code in (("dir.cl", "CL041"), ("bin.cl", "CL041"), ("../x.cl", "CL042"),
                       ("/etc/hostname", "CL042"), ("gone.cl", "CL040")):
        (tmp_path / "c.xml").write_text(
            '<CustomLayer name="L" type="SimpleGPU" version="1">\n'
            + KERNEL_OK.replace("k.cl", name) + BUFFERS_OK + "</CustomLayer>\n")
        configs = load_configs([tmp_path / "c.xml"])
        assert found(configs) == [(3, code)], name


def test_external_sources_refused_unless_allowed():
    path = DATA / "nested" / "sub" / "external_source.xml"
    refused = load_configs([path])
    (d,) = refused.diagnostics
    assert (d.line, d.code) == (3, "CL042") and "--allow-external-sources" in d.message
    assert refused.layers == {}
    allowed = load_configs([path], allow_external_sources=True)
    assert list(allowed.diagnostics) == []
    assert allowed.layers["UsesOutside"].sources[0].path == str(DATA / "outside" / "shared.cl")


@pytest.mark.parametrize("text, line", [
    ("<CustomLayer name='a'>\n<Kernel>\n</Kernal>\n</CustomLayer>", 3),
    ("<CustomLayer name='a' name='b'/>", 1),
    ("\n\n<CustomLayer name='a' type=SimpleGPU/>", 3),
    ("<CustomLayer", 1),
])
def test_syntax_errors_have_the_users_line(text, line):
    configs = load_config_string(text)
    (d,) = configs.diagnostics
    assert (d.line, d.code, d.severity) == (line, "CL001", "error")
    assert "customlayers-synthetic-root" not in d.message


@pytest.mark.parametrize("name,text", [
    ("layer.cl", "__kernel void k(__global float* x) { if (x[0] < 1.0f && x[1] > 0) x[0] = 1; }"),
    ("layer.cl", "// a source with no markup at all\n"),
    ("kernel.txt", "kernel void k(__global float* x) { x[0] = 1; }"),
])
def test_an_opencl_source_given_as_a_config_says_so(tmp_path, name, text):
    """-c relu.cl: the XML parser stopped at the source's first '<' or '&', or found nothing
    and only warned, and the run went on with no layer loaded (a new user's trial)."""
    path = tmp_path / name
    path.write_text(text)
    configs = load_configs([path])
    (d,) = configs.diagnostics
    assert (d.line, d.code, d.severity) == (1, "CL004", "error")
    assert "this is an OpenCL source, not a config: pass the .xml whose <Source " \
           "filename=...> names it" in d.message


def test_empty_file_warns():
    assert found(load_config_string("<!-- nothing -->\n")) == [(1, "CL004")]
    assert found(load_config_string("")) == [(1, "CL004")]


def test_bad_encoding():
    assert found(load_config_string(b"<CustomLayer name='\xff'/>")) == [(1, "CL003")]
    assert found(load_config_string(b'<?xml version="1.0" encoding="nope"?><a/>')) == \
        [(1, "CL003")]


def test_broken_redefinition_removes_the_earlier_layer():
    configs = make(KERNEL_OK + BUFFERS_OK)
    assert "L" in configs.layers
    load_config_string('<CustomLayer name="L" type="SimpleGPU" version="3"/>', into=configs)
    assert "L" not in configs.layers
    assert [(d.column, d.code) for d in configs.diagnostics] == \
        [(1, "CL012"), (1, "CL012"), (1, "CL070"), (40, "CL021")]
    assert configs.diagnostics.items[0].message == \
        "<CustomLayer> has no <Kernel> element; expected exactly one"


def test_every_code_has_a_description():
    assert all(code.startswith("CL") and len(code) == 5 and text for code, text in CODES.items())


def test_attribute_columns_across_lines_and_inside_values():
    configs = load_config_string('<CustomLayer name="A" type="SimpleGPU"\n'
                                 '   colour="version=2" version=\'2\'/>')
    got = [(d.line, d.column, d.code) for d in configs.diagnostics]
    assert (2, 4, "CL011") in got       # colour=, on the second line
    assert (2, 23, "CL021") in got      # the real version=, not the text inside colour's value


@pytest.mark.parametrize("worksizes, message", [
    ('global="9223372036854775807+1"',
     "global '9223372036854775807+1': the result is 9223372036854775808; a work size is at most "
     "4294967295 (2**32-1) in formula '9223372036854775807+1'"),
    ('global="X,4294967296"', "global 'X,4294967296': the result is 4294967296; a work size is "
                              "at most 4294967295 (2**32-1) in formula '4294967296'"),
    ('global="65536,65536,1024"', "global '65536,65536,1024': the sizes 65536, 65536, 1024 make "
                                  "4398046511104 work items; at most 1099511627776 (2**40) are "
                                  "allowed in formula '65536,65536,1024'"),
    ('global="X" local="8589934592"', "local '8589934592': the result is 8589934592; a work size "
                                      "is at most 4294967295 (2**32-1) in formula '8589934592'"),
])
def test_constant_work_sizes_too_large_are_reported(worksizes, message):
    configs = make(KERNEL_OK + BUFFERS_OK + f"<WorkSizes {worksizes}/>\n")
    assert found(configs) == [(9, "CL065")]
    assert configs.diagnostics.items[0].message == message
    assert "L" not in configs.layers


def test_work_sizes_with_variables_are_left_to_the_jit():
    configs = make(KERNEL_OK + BUFFERS_OK + '<WorkSizes global="X*4294967296,65536,65536"/>\n')
    assert found(configs) == []


@pytest.mark.parametrize("tensors, message", [
    ('<Tensor arg-index="0" type="input" port-index="0"/>\n'
     '<Tensor arg-index="1" type="input" port-index="2"/>\n'
     '<Tensor arg-index="2" type="output" port-index="0"/>\n',
     "input ports must be 0..1 without gaps; found 0, 2"),
    ('<Tensor arg-index="0" type="input" port-index="0"/>\n'
     '<Tensor arg-index="1" type="output" port-index="1"/>\n',
     "output ports must be 0..0 without gaps; found 1"),
])
def test_port_gaps_are_errors(tensors, message):
    configs = make(KERNEL_OK + f"<Buffers>\n{tensors}</Buffers>\n")
    assert found(configs) == [(5, "CL035")]
    assert configs.diagnostics.items[0].message == message
    assert "L" not in configs.layers


MACRO_KERNEL = ("#define KERNEL(name) __kernel void name\n"
                "KERNEL(my_k)(const __global float* in, __global float* out) { }\n")


def test_a_kernel_defined_through_a_macro_is_a_warning_only():
    configs = make(KERNEL_OK.replace('entry="k"', 'entry="my_k"') + BUFFERS_OK,
                   sources={"k.cl": MACRO_KERNEL})
    assert [(d.line, d.code, d.severity) for d in configs.diagnostics] == [(2, "CL044", "warning")]
    assert "macro mentioning kernel (KERNEL in k.cl)" in configs.diagnostics.items[0].message
    assert configs.layers["L"].entry == "my_k"


def test_a_missing_entry_without_such_a_macro_stays_an_error():
    source = "#define SCALE 2\n// #define KERNEL(n) __kernel void n\n" + KERNEL
    configs = make(KERNEL_OK.replace('entry="k"', 'entry="my_k"') + BUFFERS_OK,
                   sources={"k.cl": source})
    assert [(d.line, d.code, d.severity) for d in configs.diagnostics] == [(2, "CL044", "error")]
    assert "L" not in configs.layers


def test_define_defaults_and_names_with_line_breaks_are_errors():
    body = KERNEL_OK.replace("</Kernel>", '<Define name="A" default="1&#10;#error x"/>\n'
                             '<Define name="B&#13;C" default="1"/>\n</Kernel>') + BUFFERS_OK
    configs = make(body)
    assert found(configs) == [(4, "CL050"), (5, "CL050")]
    first, second = (d.message for d in configs.diagnostics)
    assert first == ("Define 'A': default is refused: control character '\\n' at position 2 is "
                     "not allowed (a define is one line of program text)")
    assert second.startswith("Define name 'B\\rC' is refused: control character '\\r'")


def test_an_unknown_xml_encoding_is_quoted_clipped(tmp_path):
    """The config campaign's one finding: an encoding name of 5,000 characters made a 5,066-
    character diagnostic; it is quoted as every other user text is, clipped."""
    path = tmp_path / "long.xml"
    path.write_bytes(b'<?xml version="1.0" encoding="' + b"0" * 5000 + b'"?>\n<CustomLayer/>')
    [d] = [d for d in load_configs([path]).diagnostics if d.code == "CL003"]
    assert len(d.message) < 300 and "(5000 characters)" in d.message
